// The opening of an existing cache: read-only for every reader (open_cache_for_read), or as its
// writer for one that adds records to it (open_cache_to_add: recycle-predict --write-back), with
// its manifest, and the split it reads checked (present, complete), with one message for each
// way it can fail. (A build opens a cache, new or not, through cache/writable_split.h.)
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cache/activation_store.h"
#include "cache/manifest.h"

namespace recycle {

// The cache at `dir`, opened read-only with an LRU block cache of block_cache_bytes (0: the
// store's default), and its manifest into *manifest. Throws std::runtime_error "cache DIR is
// still being created: ..." (naming the writer) for a cache whose writer has not written its
// manifest yet, else the store's error in one line.
std::unique_ptr<ActivationStore> open_cache_for_read(const std::string& dir, Manifest* manifest,
                                                     size_t block_cache_bytes = 0);

// The same opening as the cache's writer (its lock taken; nothing is created), for a reader that
// adds records to an existing cache (recycle-predict --write-back). The same errors, and the
// store's when another process holds the writer's lock.
std::unique_ptr<ActivationStore> open_cache_to_add(const std::string& dir, Manifest* manifest);

// The manifest's entry for `split`. Throws std::runtime_error when the cache has no such split
// (naming the splits it has, or the writer still writing it) and, unless allow_partial, when
// the split is incomplete (naming the writer, or saying its build did not finish);
// `partial_option` is how the caller's user names the option that allows a partial split
// ("--allow-partial" on the command line, "allow_partial" in Python).
const SplitInfo& require_split(const ActivationStore& store, const Manifest& manifest,
                               const std::string& split, bool allow_partial,
                               const std::string& partial_option);

}  // namespace recycle
