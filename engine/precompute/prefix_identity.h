// The part of a cache's identity that the model decides: model spec, the prefix's fingerprint
// and the split point. One place, used where a cache is built and where it is checked
// against the weights a training run names.
#pragma once

#include "cache/manifest.h"
#include "engine/models/block_model.h"
#include "engine/models/split_model.h"
#include "recycle/options.h"  // enum class Precision

namespace recycle {

// Sets identity->model, fingerprint, split_at, prefix_blocks and total_blocks from `model`
// split as `split`.
void set_prefix_identity(const BlockModel& model, const SplitModel& split, CacheIdentity* identity);

// The prefix's arithmetic as an identity stores it (prefix_precision): empty for fp32, else its
// name.
void set_prefix_precision(Precision precision, CacheIdentity* identity);
// The arithmetic the prefix of `identity` (the cache in `cache_dir`) ran in. Throws
// std::runtime_error naming the cache for a word this version does not know.
Precision prefix_precision_of(const CacheIdentity& identity, const std::string& cache_dir);

}  // namespace recycle
