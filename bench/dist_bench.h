// recycle-bench --nproc N: data-parallel head training, the engine beside the PyTorch DDP peer.
//
// Runs, as child processes and side by side (per seed, each engine configuration then its peer
// counterpart), on the transfer task's 0.5 cache:
//   - recycle-train --cache C (1 process, the reference for accuracy and speed);
//   - recycle-train --cache C --nproc N with --grad-compression none, fp16, topk, --sync
//     average:K and --sync async:P:F (Downpour SGD; none, and topk for the first), and with one
//     straggler at half speed (allreduce against async);
//   - recycle-train --data ... --recycle 0 --nproc N (full fine-tuning, for its bytes per step);
//   - bench/peers/ddp_peer.py --nproc N with none, fp16 and average:K (PyTorch has no top-k
//     hook), same samples, batch per rank, threads per rank and epochs;
// and prints one Markdown table (accuracy, seconds per epoch (a run's over its epochs, the
// median over the seeds: asynchronous epochs overlap, whole runs compare), samples/s, bytes per step, compression
// ratio, engine/peer throughput, and the time to a target accuracy: the engine's head runs
// evaluate after every epoch, --eval-every-epoch, and the target is allreduce's final accuracy
// less 1 point) plus dist.json and dist.csv in the output directory.
//
// With --link 1gbit|100mbit every data-parallel run (engine and peer) runs inside its own
// private network namespace (unshare -n) whose loopback is shaped with tc's token bucket
// filter; nothing leaves that namespace. No LibTorch here.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

// --link: the host's own loopback, or a private one shaped by tc tbf to 1 Gbit/s or 100 Mbit/s.
enum class Link { loopback, gbit1, mbit100 };
// --grad-compression of recycle-train --nproc.
enum class GradCompression { none, fp16, topk };

const char* link_name(Link l);
const char* grad_compression_name(GradCompression g);

struct DistBenchOptions {
  // samples, epochs, seeds, batch (per rank), threads (in total, split between the ranks;
  // 0 = every core), codec (of the 0.5 cache), weights (pretrained here when empty), out.
  CommonOptions common;
  int nproc = 0;                   // ranks (>= 2); 0 = this benchmark is not the one run
  Link link = Link::loopback;
  // The engine's --grad-compression values run with allreduce (none always runs: it is the
  // reference of the others and the peer's main counterpart).
  std::vector<GradCompression> compressions = {GradCompression::none, GradCompression::fp16,
                                               GradCompression::topk};
  int average_every = 4;           // K of --sync average:K
  // --sync async:P:F rows ("P:F" each), with --grad-compression none; the first also with topk
  // when topk runs. Empty: no asynchronous rows.
  std::vector<std::string> asyncs = {"1:1", "4:4"};
  // Straggler rows: allreduce and the first async row again, the last rank slowed to half speed
  // (--throttle, its sleep the median step of the allreduce run).
  bool straggler = true;
  int timeout_seconds = 60;        // --timeout of every data-parallel run
  std::string peer_script = std::string(RECYCLE_SOURCE_DIR) + "/bench/peers/ddp_peer.py";
};

// Registers --nproc, --link, --grad-compressions, --average-every, --async, --no-straggler,
// --timeout and --ddp-peer-script on `app`; returns --nproc (the flag that picks this benchmark).
CLI::Option* add_dist_flags(CLI::App* app, DistBenchOptions* o);

// --quick's defaults of this benchmark for the flags not given (after apply_common_defaults).
void apply_dist_defaults(const CLI::App& app, DistBenchOptions* o);

// Pretrains the encoder if needed, runs everything above and prints the table. Throws
// std::runtime_error with one line on failure (a child that failed, or a namespace that could
// not be set up).
void run_dist_bench(DistBenchOptions options);

}  // namespace recycle::bench
