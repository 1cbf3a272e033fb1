// What a user needs to look at an activation cache without the tools: its manifest
// (read_cache_manifest, recycle/manifest.h), counts and bytes (inspect_cache), every record read
// and checked (verify_cache), and orphan records deleted (compact_cache). Throws
// std::runtime_error with one line naming the directory when there is no cache there.
// Implemented in cache/verify.cc (inspection, verification, compaction) and
// engine/jobs/cache_api.cc. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/manifest.h"  // Manifest, SplitInfo

namespace recycle {

struct InspectReport {
  std::string cache_dir;
  Manifest manifest;
  uint64_t disk_bytes = 0;
  bool verified = false;
  int64_t checked = 0;   // records read and checked (verify only)
  // Records that failed a check (verify only), and those the manifest counts that could not
  // be read because reading stopped at a damaged block: never 0 when a record is damaged.
  int64_t corrupt = 0;
  // Table files whose checksums RocksDB's file check refused (verify only; 0 or 1: the check
  // stops at the first). Their records may still have read and checked clean: a damage the
  // record reads do not see is counted here, not in `corrupt`.
  int64_t damaged_files = 0;
  // Records no index entry points to (left by rebuilding a split with fewer samples): counted
  // from the records themselves with verify, else from the manifest's record count.
  int64_t orphans = 0;
  std::vector<std::string> problems;  // one line each: which record, file or index entry
  bool ok() const { return problems.empty(); }
  std::string to_json() const;  // one line
  std::string to_text() const;  // for people
};

// Throws std::runtime_error when the cache cannot be opened or has no readable manifest.
InspectReport inspect_cache(const std::string& dir, bool verify);

struct CompactReport {
  int64_t removed = 0;        // orphan records deleted
  int64_t removed_bytes = 0;  // their encoded bytes
  int64_t records = 0;        // records left
  std::string to_json() const;
};

// Deletes the records no split's index points to, fixes the manifest's counts and compacts
// the records' files. Opens the cache as its writer: refused while a build holds it.
CompactReport compact_cache(const std::string& dir);

// inspect_cache(dir, /*verify=*/true): every record read and checked; report.ok() tells.
InspectReport verify_cache(const std::string& dir);

// The manifest of the cache in `dir`, read without taking the writer's lock.
Manifest read_cache_manifest(const std::string& dir);

}  // namespace recycle
