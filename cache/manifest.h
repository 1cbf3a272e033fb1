// The cache's side of its manifest: the types (CacheIdentity, SplitInfo, Manifest) are public
// (recycle/manifest.h); here, what only the cache and the engine use with them.
#pragma once

#include <string>
#include <vector>

#include "cache/record_layout.h"  // the layout's functions
#include "recycle/manifest.h"     // CacheIdentity, SplitInfo, Manifest

namespace recycle {

// "cache DIR was built for another setup: A; B (HINT)", for the lines
// CacheIdentity::identity_differences() returned; the hint says what the calling tool offers, e.g.
// "use --rebuild to start over".
std::string mismatch_message(const std::string& dir, const std::vector<std::string>& differences,
                             const std::string& hint);

// shape_string(), "2x7x7", is declared in cache/record_layout.h.

}  // namespace recycle
