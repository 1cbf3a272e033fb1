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
  // What to do about the damaged records (verify only; "" when none): they are noted in the
  // cache's damaged-records list (cache/damaged_records.h) for a rerun of the build to compute
  // again, or why they could not be.
  std::string repair;
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

// What a rebuild (recycle-build --rebuild, recycle.build(rebuild=True)) checks before it deletes
// anything: throws InvalidArgument with one line when `dir` is not a cache that may be deleted
// whole (not a cache, or its directory also holds files that are not the cache's); nothing when
// it may be (or there is nothing there). The ranks of a sharded rebuild each check their own
// before any deletes.
void check_rebuild(const std::string& dir);

// Files of an older recycle: weights, heads and a cache's stored head were TorchScript archives,
// whose loading runs any code they hold; this version writes and reads tensor files
// (safetensors) and refuses the archives, saying to convert them. These convert, loading the
// archive, so only for files a user trusts (recycle-inspect --convert-old):
// convert_old_file writes the weights or head file at `path` to `out` as a tensor file and
// returns its kind ("weights" or "head"); a checkpoint is refused (not converted: its run starts
// over). convert_old_cache_head rewrites the head a cache stores (as the cache's writer).
// `model_given` is the program a torchscript:FILE model is loaded from (never the path the file
// or cache names). Throw InvalidArgument for something that is not an older version's file.
std::string convert_old_file(const std::string& path, const std::string& out,
                             const std::string& model_given = "");
void convert_old_cache_head(const std::string& dir, const std::string& model_given = "");

// The manifest of the cache in `dir`, read without taking the writer's lock.
Manifest read_cache_manifest(const std::string& dir);

}  // namespace recycle
