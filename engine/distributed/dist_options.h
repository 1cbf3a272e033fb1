// DistOptions (how one process takes part in a data-parallel job) lives in
// include/recycle/options.h; here, the parsing of --master and the job token's helpers. No
// LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/options.h"

namespace recycle {

// Where a job's store is, from --master:
//   HOST:PORT   a c10d TCPStore (HOST may be a name, an IPv4 literal or [IPv6]); rank 0 hosts it
//               when nobody else does, and it listens on every interface (LibTorch 1.13's
//               TCPStore has no bind address: docs/data-parallel.md)
//   file:PATH   a c10d FileStore: a file every rank opens (the launcher behind --nproc uses one
//               in a private 0700 directory, so a local job has no store socket at all)
struct MasterAddress {
  std::string host;  // TCP: the host, without IPv6 brackets
  int port = 0;      // TCP: 1..65535
  std::string file;  // FileStore: an absolute path ("" for TCP)

  bool is_file() const { return !file.empty(); }
};

// Parses --master. Throws std::invalid_argument naming the flag.
MasterAddress parse_master(const std::string& master);

// What a sharded job's --cache may hold in place of the rank: with --nproc every rank runs on
// this machine and needs a directory of its own ("cache-{rank}").
constexpr const char* kRankMarker = "{rank}";
// `path` with every kRankMarker replaced by `rank`.
std::string path_for_rank(const std::string& path, int rank);
// A sharded job's --cache checked before its workers start: with --nproc above 1 it must hold
// kRankMarker. Throws std::invalid_argument with one line; nothing for a job not sharded.
void check_sharded_cache(const DistOptions& dist, const std::string& cache_dir);

// Parses --throttle RANK:MS into dist->throttle_rank and throttle_ms (MS of 1..60000). Throws
// std::invalid_argument naming the flag.
void parse_throttle(const std::string& spec, DistOptions* dist);

// The job token's environment variable: the launcher sets it for its workers; ranks started by
// hand across machines are given it by the user (every rank the same).
constexpr const char* kJobTokenVariable = "RECYCLE_JOB_TOKEN";

// RECYCLE_JOB_TOKEN from the environment, "" when unset.
std::string job_token_from_environment();

// `bytes` random bytes from the kernel (getrandom), as 2 * bytes hexadecimal digits. Throws
// std::runtime_error when the kernel has none to give.
std::string random_hex(size_t bytes);

}  // namespace recycle
