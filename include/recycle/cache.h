// What a user needs to look at an activation cache without the tools: its manifest, counts and
// bytes (inspect_cache), every record read and checked (verify_cache), orphan records deleted
// (compact_cache), and the manifest alone (read_cache_manifest). Throws std::runtime_error with
// one line naming the directory when there is no cache there.
#pragma once

#include <string>

#include "cache/manifest.h"  // Manifest, SplitInfo
#include "cache/verify.h"    // InspectReport, CompactReport, inspect_cache, compact_cache

namespace recycle {

// inspect_cache(dir, /*verify=*/true): every record read and checked; report.ok() tells.
InspectReport verify_cache(const std::string& dir);

// The manifest of the cache in `dir`, read without taking the writer's lock.
Manifest read_cache_manifest(const std::string& dir);

}  // namespace recycle
