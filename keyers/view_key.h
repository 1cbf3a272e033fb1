// View keys: the cache key of one augmented view of a sample (docs/augmentation.md). A split
// built with `--augment SPEC --views K` stores, for a sample whose content key is C, K records
// under view_key(C, SPEC, 0..K-1) instead of one under C; its samples index still holds C, so
// samples that share content share their views, and readers (training, verify) derive the view
// keys from the index. The key also seeds the view's randomness (view_seed), so every rebuild,
// every resumed build and every rank makes the same bytes for a view. No LibTorch; thread safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "recycle/key.h"

namespace recycle {

// XXH3-128 of a domain tag, the content key, the canonical augmentation spec and the view
// index (length-delimited fields, as ContentHasher hashes them). Equal arguments give equal
// keys; another content key, spec or view gives another key (and never the content key).
Key view_key(const Key& content, std::string_view augment_spec, int64_t view);

// The 64-bit seed of the random draws that make the view whose key is `view`.
inline uint64_t view_seed(const Key& view) { return view.lo ^ (view.hi * 0x9E3779B97F4A7C15ULL); }

}  // namespace recycle
