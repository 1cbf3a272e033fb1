// recycle-bench --nproc N: data-parallel head training, the engine beside the PyTorch DDP peer.
//
// Runs, as child processes and side by side (per seed, each engine configuration then its peer
// counterpart), on the transfer task's 0.5 cache:
//   - recycle-train --cache C (1 process, the reference for accuracy and speed);
//   - recycle-train --cache C --nproc N with --grad-compression none, fp16, topk and
//     --sync average:K;
//   - recycle-train --data ... --recycle 0 --nproc N (full fine-tuning, for its bytes per step);
//   - bench/peers/ddp_peer.py --nproc N with none, fp16 and average:K (PyTorch has no top-k
//     hook), same samples, batch per rank, threads per rank and epochs;
// and prints one Markdown table (accuracy, median epoch, samples/s, bytes per step, compression
// ratio, engine/peer throughput) plus dist.json and dist.csv in the output directory.
//
// With --link 1gbit|100mbit every data-parallel run (engine and peer) runs inside its own
// private network namespace (unshare -n) whose loopback is shaped with tc's token bucket
// filter; nothing leaves that namespace. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recycle::bench {

struct DistBenchOptions {
  int nproc = 2;                   // ranks (>= 2)
  std::string link = "loopback";   // loopback | 1gbit | 100mbit
  // The engine's --grad-compression values run with allreduce (none always runs: it is the
  // reference of the others and the peer's main counterpart).
  std::vector<std::string> compressions = {"none", "fp16", "topk"};
  int average_every = 4;           // K of --sync average:K
  int timeout_seconds = 60;        // --timeout of every data-parallel run
  int64_t samples = 5000;          // training samples of classes 5-9
  int64_t epochs = 4;
  int64_t seeds = 3;
  int64_t batch = 128;             // per rank
  int threads = 0;                 // in total, split between the ranks; 0 = every core
  std::string codec = "fp16";      // of the 0.5 cache
  std::string weights;             // the pretrained encoder (must exist)
  std::string out;                 // output directory (exists)
  std::string tools_dir;           // where recycle-build and recycle-train are
  std::string python = "/usr/bin/python3";
  std::string peer_script;         // bench/peers/ddp_peer.py
};

// The link names --link accepts, and the tc rate of each shaped one ("" for loopback).
bool is_known_link(const std::string& link);

// Runs everything above and prints the table. Throws std::runtime_error with one line on
// failure (a child that failed, or a namespace that could not be set up).
void run_dist_bench(const DistBenchOptions& options);

}  // namespace recycle::bench
