// Inspecting a cache: its manifest, counts and bytes, and with verify, a read and check of
// every record (header, checksum, shape) and every file's block checksums. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/manifest.h"

namespace recycle {

struct InspectReport {
  std::string cache_dir;
  Manifest manifest;
  uint64_t disk_bytes = 0;
  bool verified = false;
  int64_t checked = 0;   // records read and checked (verify only)
  int64_t corrupt = 0;   // records that failed a check (verify only)
  std::vector<std::string> problems;  // one line each: which record, file or index entry
  bool ok() const { return problems.empty(); }
  std::string to_json() const;  // one line
  std::string to_text() const;  // for people
};

// Throws std::runtime_error when the cache cannot be opened or has no readable manifest.
InspectReport inspect_cache(const std::string& dir, bool verify);

}  // namespace recycle
