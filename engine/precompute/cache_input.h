// A build whose samples are another cache's records: deriving a cache level
// (engine/train/cache_levels.h) is a build whose source is another cache: a SplitBuild made from
// CacheBuildInputs (build_stages.h). Its stages are a build's: the keys and labels are the base
// split's index (SplitInputs), and the ChunkEncoder runs `blocks` (the blocks after the base's
// split point, folded as recycle-build folds a prefix) over the base's decoded records instead of
// the prefix over images. LibTorch is in this header; build_stages.h stays free of it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/manifest.h"
#include "engine/models/block_model.h"

namespace recycle {

// Another cache's split, as the input of a build. Implemented where that cache is read
// (engine/train/cache_levels.cc reads it with CachedBatches: MultiGet and decode). One thread
// (the one running the stages) calls it.
class CacheInput {
 public:
  virtual ~CacheInput() = default;
  // The split's index as stored: a key and a label per sample, in order.
  virtual const std::vector<IndexEntry>& index() const = 0;
  // The records of the samples index()[positions[i]], i < n, decoded: float32 [n, record
  // shape] on the build's device.
  virtual torch::Tensor read(const int64_t* positions, int64_t n) = 0;
};

struct CacheBuildInputs {
  std::unique_ptr<CacheInput> input;
  std::string data;     // what the base split was built from (its SplitInfo::data)
  std::string classes;  // the --classes filter it was built with (its SplitInfo::classes)
  // The blocks after the base's split point as a model of their own (modules shared, frozen:
  // eval mode, no grad). Read by the ChunkEncoder's constructor only (it folds its own copy).
  const BlockModel* blocks = nullptr;
  std::string head;  // the new cache's head blob (module_to_bytes of the head)
  // The manifest this build asks for: identity (its codec is the records' codec), record
  // shapes, class names; no splits, no counts.
  Manifest manifest;
};

}  // namespace recycle
