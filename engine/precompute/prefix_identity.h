// The part of a cache's identity that the model decides: model spec, the prefix's fingerprint
// and the split point. One place, used where a cache is built and where it is checked
// against the weights a training run names.
#pragma once

#include "cache/manifest.h"
#include "engine/models/block_model.h"
#include "engine/models/split_model.h"

namespace recycle {

// Sets identity->model, fingerprint, split_at, prefix_blocks and total_blocks from `model`
// split as `split`.
void set_prefix_identity(const BlockModel& model, const SplitModel& split, CacheIdentity* identity);

}  // namespace recycle
