// DistOptions: how one process takes part in a data-parallel job. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/options.h"

namespace recycle {

struct DistOptions {
  // --nproc N (launcher only): start N local workers and wait for them. 0 = no launcher.
  int nproc = 0;
  // --rank R --world-size W --master HOST:PORT: this process is rank R of a W-process job whose
  // TCPStore listens at HOST:PORT (hosted by the launcher, or by rank 0 across machines).
  // world_size 1 = training alone (no process group at all).
  int rank = 0;
  int world_size = 1;
  std::string master;
  // The store at `master` is hosted by a launcher (--nproc), not by rank 0 (set by the launcher
  // through the environment of its workers: RECYCLE_LAUNCHED=1).
  bool store_hosted_elsewhere = false;
  // Every collective and store operation gives up after this many seconds, and the job
  // ends naming the rank it lost.
  int timeout_seconds = 60;
  // How gradients travel: none (fp32 allreduce), fp16 (halves, allreduce), topk (AdaComp:
  // binned adaptive selection, quantised values, error feedback, allgather).
  GradCompression grad_compression = GradCompression::kNone;
  // allreduce: average gradients every step; average:K: K local steps, then average
  // parameters (K >= 1).
  Sync sync;
  // Gradient bucket size cap in MiB: buckets are reduced as they fill during backward.
  double bucket_mb = 1.0;

  bool distributed() const { return world_size > 1; }

  // Checks the options together (rank below world size, a master for a world above 1, a
  // timeout, compression only with allreduce, a positive bucket cap). Throws
  // std::invalid_argument with one line.
  void validate() const;
};

// Parses "HOST:PORT" (PORT 1..65535; HOST may be [IPv6]). Throws std::invalid_argument naming
// the flag.
void parse_master(const std::string& master, std::string* host, int* port);

}  // namespace recycle
