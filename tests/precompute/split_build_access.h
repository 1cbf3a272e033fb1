// SplitBuild's pieces (its inputs, encoder and opened cache), which it hands to no one, for tests
// that run or inspect one of them alone.
#pragma once

#include "cache/writable_split.h"
#include "engine/precompute/build_stages.h"
#include "engine/precompute/chunk_encoder.h"
#include "engine/precompute/split_inputs.h"

namespace recycle {

class SplitBuildTestAccess {
 public:
  static SplitInputs& inputs(SplitBuild& b) { return b.inputs(); }
  static ChunkEncoder& encoder(SplitBuild& b) { return b.encoder(); }
  static WritableSplit& split(SplitBuild& b) { return b.split(); }
};

}  // namespace recycle
