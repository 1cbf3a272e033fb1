#include "bench/dist_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/stats.h"
#include "bench/bench_util.h"
#include "bench/report_table.h"
#include "bench/transfer_task.h"

namespace recycle::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The tc rate of a shaped link; "" for loopback, the host's own, unshaped and outside any
// namespace.
std::string link_rate(Link l) { return l == Link::loopback ? "" : link_name(l); }

// One row of the table: one configuration of one side (engine or peer) over every seed.
struct DistRow {
  std::string who;          // engine | peer
  std::string kind;         // head (0.5 cache) | full (full fine-tuning)
  int world = 1;            // processes
  std::string compression;  // none | fp16 | topk ("-" alone)
  std::string sync;         // allreduce | average:K | async:P:F ("-" alone)
  bool straggler = false;   // the last rank at half speed (--throttle)
  std::vector<double> accuracy;
  std::vector<double> epoch_seconds;  // every epoch of every seed
  // Per seed, the engine's head runs: the test accuracy after each epoch (--eval-every-epoch);
  // that run's epochs are epoch_seconds[seed * epochs, (seed + 1) * epochs).
  std::vector<std::vector<double>> epoch_acc;
  double bytes_per_step = 0;          // per rank, handed to collectives
  double fp32_bytes_per_step = 0;
  double compression_ratio = 0;
  double full_fp32_bytes_per_step = 0;  // the peer reports full fine-tuning's in every run
  std::vector<json> raw;                // every run's JSON line

  int64_t epochs = 1;                   // per run

  // A run's training seconds over its epochs, the median over the runs (seeds). Not the median
  // of single epochs: asynchronous epochs overlap (an epoch ends with its last chunk, which a
  // slow worker may hold while the others train the next one), so only whole runs compare.
  double epoch() const {
    std::vector<double> per_run;
    for (size_t i = 0; i + static_cast<size_t>(epochs) <= epoch_seconds.size(); i += epochs) {
      double total = 0;
      for (int64_t e = 0; e < epochs; ++e) total += epoch_seconds[i + e];
      per_run.push_back(total / static_cast<double>(epochs));
    }
    return median(per_run);
  }
  std::string label() const {
    std::string s = who == "engine" ? "engine" : "PyTorch DDP peer";
    s += kind == "full" ? ", full fine-tuning" : ", head 0.5";
    return s;
  }
  std::string key() const {
    return kind + "/" + compression + "/" + sync + "/" + std::to_string(world) + (straggler ? "/straggler" : "");
  }
  std::string sync_text() const { return straggler ? sync + ", 1 straggler" : sync; }

  // Per seed: the training seconds until the first epoch whose test accuracy reached `target`
  // (the epochs' seconds summed; the evaluations are not in them), or -1 when none did.
  std::vector<double> seconds_to(double target) const {
    std::vector<double> out;
    for (size_t s = 0; s < epoch_acc.size(); ++s) {
      double t = 0, reached = -1;
      const size_t first = s * static_cast<size_t>(epochs);
      for (size_t e = 0; e < epoch_acc[s].size() && first + e < epoch_seconds.size(); ++e) {
        t += epoch_seconds[first + e];
        if (epoch_acc[s][e] >= target) {
          reached = t;
          break;
        }
      }
      out.push_back(reached);
    }
    return out;
  }
};

// "12.3" (the median over the seeds that reached the target), "12.3 (2/3 seeds)" when some
// did not, "not reached" when none did, "-" without per-epoch accuracies.
std::string seconds_to_text(const std::vector<double>& per_seed) {
  std::vector<double> reached;
  for (double s : per_seed) {
    if (s >= 0) reached.push_back(s);
  }
  if (per_seed.empty()) return "-";
  if (reached.empty()) return "not reached";
  std::string t = fmt(median(reached), 1);
  if (reached.size() < per_seed.size()) {
    t += " (" + std::to_string(reached.size()) + "/" + std::to_string(per_seed.size()) + " seeds)";
  }
  return t;
}

class DistBench {
 public:
  explicit DistBench(DistBenchOptions o) : o_(std::move(o)), c_(o_.common) {
    work_ = c_.work_dir();
    cores_ = cores();
    total_threads_ = c_.threads_or_cores();
    threads_per_rank_ = std::max(1, total_threads_ / o_.nproc);
    average_ = "average:" + std::to_string(o_.average_every);
  }
  // c_ refers to o_.common: not copied.
  DistBench(const DistBench&) = delete;
  DistBench& operator=(const DistBench&) = delete;

  void run() {
    ensure_encoder(&c_);
    const auto start = std::chrono::steady_clock::now();
    check_link();
    build_cache();
    // Engine configurations and the peer's counterpart of each (when PyTorch has one).
    rows_.push_back(engine_row("head", 1, "-", "-"));
    rows_.push_back(engine_row("head", o_.nproc, "none", "allreduce"));
    for (GradCompression c : o_.compressions) {
      if (c == GradCompression::none) continue;
      rows_.push_back(engine_row("head", o_.nproc, grad_compression_name(c), "allreduce"));
    }
    rows_.push_back(engine_row("head", o_.nproc, "none", average_));
    for (const std::string& a : o_.asyncs) rows_.push_back(engine_row("head", o_.nproc, "none", "async:" + a));
    const bool topk = std::find(o_.compressions.begin(), o_.compressions.end(), GradCompression::topk) !=
                      o_.compressions.end();
    if (!o_.asyncs.empty() && topk) rows_.push_back(engine_row("head", o_.nproc, "topk", "async:" + o_.asyncs[0]));
    if (o_.straggler) {
      rows_.push_back(engine_row("head", o_.nproc, "none", "allreduce"));
      rows_.back().straggler = true;
      if (!o_.asyncs.empty()) {
        rows_.push_back(engine_row("head", o_.nproc, "none", "async:" + o_.asyncs[0]));
        rows_.back().straggler = true;
      }
    }
    rows_.push_back(engine_row("full", o_.nproc, "none", "allreduce"));
    // The peer: PyTorch's own ways (DDP's fp32 allreduce and fp16_compress_hook, and
    // PeriodicModelAverager); it has no top-k.
    rows_.push_back(peer_row("none", "allreduce"));
    if (find("engine", "head/fp16/allreduce/" + std::to_string(o_.nproc))) rows_.push_back(peer_row("fp16", "allreduce"));
    rows_.push_back(peer_row("none", average_));
    for (DistRow& r : rows_) r.epochs = c_.epochs;
    for (int64_t seed = 0; seed < c_.seeds; ++seed) {
      for (DistRow& r : rows_) {
        if (r.who != "engine") continue;
        run_engine(&r, seed);
        if (DistRow* p = peer_of(r)) run_peer(p, seed);
      }
    }
    report(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

 private:
  static DistRow engine_row(const std::string& kind, int world, const std::string& compression,
                            const std::string& sync) {
    DistRow r;
    r.who = "engine";
    r.kind = kind;
    r.world = world;
    r.compression = compression;
    r.sync = sync;
    return r;
  }

  DistRow peer_row(const std::string& compression, const std::string& sync) const {
    DistRow r = engine_row("head", o_.nproc, compression, sync);
    r.who = "peer";
    return r;
  }

  DistRow* peer_of(const DistRow& engine) {
    for (DistRow& r : rows_) {
      if (r.who == "peer" && r.key() == engine.key()) return &r;
    }
    return nullptr;
  }
  const DistRow* find(const std::string& who, const std::string& key) const {
    for (const DistRow& r : rows_) {
      if (r.who == who && r.key() == key) return &r;
    }
    return nullptr;
  }

  // argv, run inside a private network namespace whose loopback is shaped to --link (or as is
  // on loopback). The namespace has nothing but its own loopback, so nothing leaves it.
  std::vector<std::string> on_link(const std::vector<std::string>& argv) const {
    const std::string& rate = link_rate(o_.link);
    if (rate.empty()) return argv;
    std::vector<std::string> w = {
        unshare_, "-n", "/bin/sh", "-c",
        "set -e; PATH=\"$PATH:/usr/sbin:/sbin\"; ip link set lo up; ip link set lo mtu 9000; "
        "tc qdisc add dev lo root tbf rate " + rate + " burst 1mb latency 100ms; exec \"$@\"",
        "sh"};
    w.insert(w.end(), argv.begin(), argv.end());
    return w;
  }

  // Fails with one line when the shaped link cannot be set up here.
  void check_link() {
    if (link_rate(o_.link).empty()) return;
    for (const char* p : {"/usr/bin/unshare", "/bin/unshare"}) {
      if (access(p, X_OK) == 0) {
        unshare_ = p;
        break;
      }
    }
    const std::string needs = "--link " + std::string(link_name(o_.link)) + " needs unshare (util-linux), ip and tc (iproute2) "
                              "and the right to make a network namespace (root or CAP_SYS_ADMIN); "
                              "--link loopback needs none of them";
    if (unshare_.empty()) throw std::runtime_error(needs + ": unshare not found");
    const ChildExit e = spawn_child(on_link({"/bin/echo", "{}"}), work_);
    if (!e.ok()) throw std::runtime_error(needs + ": " + e.first_error_line());
    note("data-parallel runs go over a private loopback shaped to " + std::string(link_name(o_.link)) + " (mtu 9000, tc tbf)");
  }

  void build_cache() {
    cache_ = work_ + "/dist-cache-r50";
    note("building the 0.5 cache for the data-parallel runs");
    for (const std::string split : {"train", "test"}) {
      std::vector<std::string> argv = {c_.tool("recycle-build"), "--data", "fashion-mnist", "--classes", "5-9",
                                       "--split", split, "--weights", c_.weights, "--recycle", "0.5",
                                       "--codec", codec_name(c_.codec), "--cache", cache_, "--threads",
                                       std::to_string(total_threads_), "--json"};
      if (split == "train") argv.insert(argv.end(), {"--limit", std::to_string(c_.samples), "--rebuild"});
      run_child(argv, work_);
    }
  }

  void run_engine(DistRow* r, int64_t seed) {
    note(r->label() + ", " + std::to_string(r->world) + " process" + (r->world > 1 ? "es" : "") +
         (r->world > 1 ? ", " + r->compression + ", " + r->sync : "") + ", seed " + std::to_string(seed));
    std::vector<std::string> argv = {c_.tool("recycle-train")};
    if (r->kind == "full") {
      argv.insert(argv.end(), {"--data", "fashion-mnist", "--classes", "5-9", "--limit",
                               std::to_string(c_.samples), "--weights", c_.weights, "--recycle", "0"});
    } else {
      argv.insert(argv.end(), {"--cache", cache_});
    }
    argv.insert(argv.end(), {"--epochs", std::to_string(c_.epochs), "--batch", std::to_string(c_.batch),
                             "--seed", std::to_string(seed), "--threads", std::to_string(total_threads_),
                             "--json"});
    if (r->kind == "head") argv.push_back("--eval-every-epoch");  // for the time to target
    if (r->world > 1) {
      argv.insert(argv.end(), {"--nproc", std::to_string(r->world), "--grad-compression", r->compression,
                               "--sync", r->sync, "--timeout", std::to_string(o_.timeout_seconds)});
      if (r->straggler) {
        // The last rank sleeps one step's time after each step: half speed.
        argv.insert(argv.end(), {"--throttle", std::to_string(r->world - 1) + ":" + std::to_string(straggler_ms_)});
      }
      argv = on_link(argv);
    }
    const json j = run_child(argv, work_).result;
    if (r->kind == "head" && r->world > 1 && r->compression == "none" && r->sync == "allreduce" && !r->straggler &&
        straggler_ms_ == 0) {
      // The straggler's sleep: this run's median step (every rank steps alike under allreduce).
      const double steps_per_epoch = j.at("steps").get<double>() / std::max<double>(1, c_.epochs);
      std::vector<double> epochs = j.at("epoch_seconds").get<std::vector<double>>();
      straggler_ms_ = std::max(1, static_cast<int>(1000 * median(epochs) / std::max(1.0, steps_per_epoch) + 0.5));
      note("straggler rows: the last rank sleeps " + std::to_string(straggler_ms_) + " ms a step (one step's time)");
    }
    if (r->world > 1) {
      // A flag the tool ignored would make this table lie: check what it says it ran.
      if (j.value("world_size", 0) != r->world || j.value("grad_compression", "") != r->compression ||
          j.value("sync", "") != r->sync) {
        throw std::runtime_error("recycle-train --nproc " + std::to_string(r->world) + " --grad-compression " +
                                 r->compression + " --sync " + r->sync + " reported world_size " +
                                 j.value("world_size", json(nullptr)).dump() + ", grad_compression " +
                                 j.value("grad_compression", json(nullptr)).dump() + ", sync " +
                                 j.value("sync", json(nullptr)).dump());
      }
      r->bytes_per_step = j.at("bytes_per_step").get<double>();
      r->fp32_bytes_per_step = j.at("fp32_bytes_per_step").get<double>();
      r->compression_ratio = j.at("compression_ratio").get<double>();
      if (j.contains("async")) {
        // Rank 0's own figures would count its worker's exchanges with its own shard, which
        // cross no link: the mean over the workers of what crossed one is the row's figure.
        r->bytes_per_step = j["async"].at("link_bytes_per_step").get<double>();
      }
    }
    if (j.contains("test_acc") && j["test_acc"].is_number()) r->accuracy.push_back(j["test_acc"].get<double>());
    for (double e : j.at("epoch_seconds")) r->epoch_seconds.push_back(e);
    if (j.contains("epoch_test_acc")) r->epoch_acc.push_back(j["epoch_test_acc"].get<std::vector<double>>());
    r->raw.push_back(j);
  }

  void run_peer(DistRow* r, int64_t seed) {
    note(r->label() + ", " + std::to_string(r->world) + " processes, " + r->compression + ", " + r->sync +
         ", seed " + std::to_string(seed));
    const std::vector<std::string> argv = {
        c_.python, o_.peer_script, "--nproc", std::to_string(r->world), "--threads",
        std::to_string(threads_per_rank_), "--batch", std::to_string(c_.batch), "--classes", "5-9",
        "--limit", std::to_string(c_.samples), "--epochs", std::to_string(c_.epochs), "--seed",
        std::to_string(seed), "--grad-compression", r->compression, "--sync", r->sync, "--timeout",
        std::to_string(o_.timeout_seconds)};
    const json j = run_child(on_link(argv), work_).result;
    for (double e : j.at("head_epoch_seconds")) r->epoch_seconds.push_back(e);
    r->bytes_per_step = j.at("bytes_per_step").get<double>();
    r->fp32_bytes_per_step = j.at("fp32_bytes_per_step").get<double>();
    r->compression_ratio = j.at("compression_ratio").get<double>();
    r->full_fp32_bytes_per_step = j.at("full_fp32_bytes_per_step").get<double>();
    r->raw.push_back(j);
  }

  double samples_per_s(const DistRow& r) const { return r.epoch() > 0 ? c_.samples / r.epoch() : 0; }

  static std::string accuracy(const std::vector<double>& a) {
    if (a.empty()) return "-";
    return a.size() == 1 ? fmt(a[0], 4) : fmt(mean(a), 4) + " ± " + fmt(stddev(a), 4);
  }

  void report(double seconds) const {
    const std::string head_none = "head/none/allreduce/" + std::to_string(o_.nproc);
    const DistRow* none = find("engine", head_none);
    const DistRow* full = find("engine", "full/none/allreduce/" + std::to_string(o_.nproc));
    const DistRow* peer_none = find("peer", head_none);
    // The target accuracy of the time-to-target column: allreduce's final accuracy (mean over
    // the seeds) less 1 point, the tolerance of the async goal.
    const double target = none && !none->accuracy.empty() ? mean(none->accuracy) - 0.01 : -1;

    json j;
    j["options"] = c_.to_json();
    j["options"].update({{"nproc", o_.nproc},
                         {"link", link_name(o_.link)},
                         {"batch_per_rank", c_.batch},
                         {"threads_total", total_threads_},
                         {"threads_per_rank", threads_per_rank_},
                         {"codec", codec_name(c_.codec)},
                         {"average_every", o_.average_every}});
    if (target >= 0) j["target_acc"] = target;
    j["machine"] = {{"cores", cores_}};
    j["seconds"] = seconds;
    Table csv({"who", "kind", "processes", "grad_compression", "sync", "acc_mean", "acc_std", "epoch_s",
               "samples_per_s", "bytes_per_step", "fp32_bytes_per_step", "compression_ratio", "bytes_over_none",
               "epoch_over_none", "engine_over_peer", "seconds_to_target"});
    Table table({"run", "processes", "gradients", "sync", "test acc (mean ± sd)", "epoch s (run / epochs)", "samples/s",
                 "bytes/step/rank", "compression", "bytes / none", "epoch / none", "engine/peer",
                 "s to target"});
    std::ostringstream md;
    md << "Data-parallel head training, " << o_.nproc << " ranks on " << link_name(o_.link) << ": " << c_.samples
       << " samples, " << c_.epochs << " epochs, batch " << c_.batch << " per rank, " << threads_per_rank_
       << " thread" << (threads_per_rank_ == 1 ? "" : "s") << " per rank (" << total_threads_
       << " for the 1-process run), " << c_.seeds << " seed" << (c_.seeds == 1 ? "" : "s");
    if (target >= 0) {
      md << "; s to target: training seconds until the test accuracy first reached " << fmt(target, 4)
         << " (allreduce's less 1 point; evaluated after every epoch, median over the seeds)";
    }
    md << "\n\n";
    for (const DistRow& r : rows_) {
      const std::vector<double> to_target = target >= 0 ? r.seconds_to(target) : std::vector<double>();
      std::vector<json> to_target_json;
      for (double s : to_target) to_target_json.push_back(s >= 0 ? json(s) : json(nullptr));
      const bool dp = r.world > 1;
      // Each side against its own fp32 allreduce run.
      const DistRow* own_none = r.who == "engine" ? none : peer_none;
      const bool vs_none = r.kind == "head" && dp && own_none && own_none->epoch() > 0;
      const double over_none = vs_none ? r.epoch() / own_none->epoch() : 0;
      const double bytes_over_none = vs_none && own_none->bytes_per_step > 0 ? r.bytes_per_step / own_none->bytes_per_step : 0;
      double over_peer = 0;
      if (r.who == "engine") {
        const DistRow* p = find("peer", r.key());
        if (p && samples_per_s(*p) > 0) over_peer = samples_per_s(r) / samples_per_s(*p);
      }
      j["rows"].push_back({{"who", r.who},
                           {"kind", r.kind},
                           {"processes", r.world},
                           {"grad_compression", r.compression},
                           {"sync", r.sync},
                           {"straggler", r.straggler},
                           {"accuracy", r.accuracy},
                           {"acc_mean", mean(r.accuracy)},
                           {"acc_std", stddev(r.accuracy)},
                           {"epoch_seconds", r.epoch_seconds},
                           {"epoch_seconds_per_run", r.epoch()},  // a run's seconds / epochs, median of runs
                           {"samples_per_s", samples_per_s(r)},
                           {"bytes_per_step", r.bytes_per_step},
                           {"fp32_bytes_per_step", r.fp32_bytes_per_step},
                           {"compression_ratio", r.compression_ratio},
                           {"bytes_over_none", bytes_over_none},
                           {"epoch_over_none", over_none},
                           {"engine_over_peer", over_peer},
                           {"epoch_test_acc", r.epoch_acc},
                           {"seconds_to_target", to_target_json},
                           {"runs", r.raw}});
      csv.add_row({r.who, r.kind, std::to_string(r.world), r.compression, r.sync_text(), csv_number(mean(r.accuracy)),
                   csv_number(stddev(r.accuracy)), csv_number(r.epoch()), csv_number(samples_per_s(r)),
                   csv_number(r.bytes_per_step), csv_number(r.fp32_bytes_per_step), csv_number(r.compression_ratio),
                   csv_number(bytes_over_none), csv_number(over_none), csv_number(over_peer),
                   seconds_to_text(to_target)});
      table.add_row({r.label(), std::to_string(r.world), r.compression, r.sync_text(), accuracy(r.accuracy),
                     fmt(r.epoch(), 2), fmt(samples_per_s(r), 0), dp ? bytes_text(r.bytes_per_step) : "-",
                     dp && r.compression_ratio > 0 ? fmt(r.compression_ratio, 1) + "x" : "-",
                     bytes_over_none > 0 ? fmt(bytes_over_none, 3) : "-", over_none > 0 ? fmt(over_none, 2) : "-",
                     over_peer > 0 ? fmt(over_peer, 2) + "x" : "-", seconds_to_text(to_target)});
    }
    write_text(work_ + "/dist.csv", csv.csv());
    md << table.markdown();
    md << "\n";
    if (!o_.asyncs.empty()) {
      md << "Async rows' bytes/step/rank: what a worker's pushes and fetches sent over a link, per step, "
            "over all workers (rank 0's worker reaches its own shard without one); their compression: rank 0's "
            "pushes and fetches against fp32.\n";
    }
    if (full && none) {
      md << "fp32 gradient bytes per step per rank: full fine-tuning " << bytes_text(full->fp32_bytes_per_step)
         << ", head at 0.5 " << bytes_text(none->fp32_bytes_per_step) << " (the head sends "
         << fmt(none->fp32_bytes_per_step / full->fp32_bytes_per_step, 3) << " of full fine-tuning's)";
      if (peer_none) {
        md << "; the peer counts " << bytes_text(peer_none->full_fp32_bytes_per_step) << " and "
           << bytes_text(peer_none->fp32_bytes_per_step);
      }
      md << ".\n";
      j["bytes_full_over_head"] = full->fp32_bytes_per_step / none->fp32_bytes_per_step;
    }
    md << "Engine/peer head-epoch throughput (" << link_name(o_.link) << ", same samples, batch and threads per rank, "
       << "runs' seconds per epoch, medians over the seeds): ";
    bool first = true;
    for (const DistRow& r : rows_) {
      const DistRow* p = r.who == "engine" ? find("peer", r.key()) : nullptr;
      if (!p) continue;
      md << (first ? "" : ", ") << r.compression << "/" << r.sync << " "
         << fmt(samples_per_s(r) / samples_per_s(*p), 2) << "x";
      first = false;
    }
    md << "; engine topk against peer none " << [&] {
      const DistRow* topk = find("engine", "head/topk/allreduce/" + std::to_string(o_.nproc));
      return topk && peer_none ? fmt(samples_per_s(*topk) / samples_per_s(*peer_none), 2) + "x" : std::string("-");
    }() << ".\n";
    // Asynchronous training against synchronous, by the goals.
    const std::string n = std::to_string(o_.nproc);
    if (!o_.asyncs.empty()) {
      const std::string a = "async:" + o_.asyncs[0];
      const DistRow* async = find("engine", "head/none/" + a + "/" + n);
      if (async && none && !async->accuracy.empty() && !none->accuracy.empty()) {
        const double points = 100 * (mean(async->accuracy) - mean(none->accuracy));
        md << "Async (" << a << ") accuracy minus allreduce's: " << fmt(points, 2) << " points (goal: within 1).\n";
        j["async_minus_allreduce_points"] = points;
      }
      const DistRow* slow_sync = find("engine", "head/none/allreduce/" + n + "/straggler");
      const DistRow* slow_async = find("engine", "head/none/" + a + "/" + n + "/straggler");
      if (slow_sync && slow_async && slow_async->epoch() > 0) {
        const double speedup = slow_sync->epoch() / slow_async->epoch();
        md << "One straggler at half speed (" << straggler_ms_ << " ms a step): allreduce's epoch / async's = "
           << fmt(speedup, 2) << "x (goal: at least 1.5x).\n";
        j["straggler_sync_over_async"] = speedup;
        j["straggler_ms"] = straggler_ms_;
      }
      // Time to the target accuracy, async against allreduce, without and with the straggler.
      const std::pair<const DistRow*, const DistRow*> pairs[] = {{none, async}, {slow_sync, slow_async}};
      for (const auto& [sync_row, async_row] : pairs) {
        if (target < 0 || !sync_row || !async_row) continue;
        const std::vector<double> s = sync_row->seconds_to(target), as = async_row->seconds_to(target);
        md << "Time to " << fmt(target, 4) << " test accuracy" << (sync_row->straggler ? " with the straggler" : "")
           << ": allreduce " << seconds_to_text(s) << " s, " << a << " " << seconds_to_text(as) << " s";
        const bool all = !s.empty() && !as.empty() && *std::min_element(s.begin(), s.end()) >= 0 &&
                         *std::min_element(as.begin(), as.end()) >= 0;
        if (all && median(as) > 0) {
          md << " (allreduce / async = " << fmt(median(s) / median(as), 2) << "x)";
          j[sync_row->straggler ? "straggler_to_target_sync_over_async" : "to_target_sync_over_async"] =
              median(s) / median(as);
        }
        md << ".\n";
      }
      const DistRow* topk_sync = find("engine", "head/topk/allreduce/" + n);
      const DistRow* topk_async = find("engine", "head/topk/" + a + "/" + n);
      if (topk_sync && topk_async && topk_async->epoch() > 0) {
        const double speedup = topk_sync->epoch() / topk_async->epoch();
        md << "topk pushes against topk allreduce: allreduce's epoch / async's = " << fmt(speedup, 2)
           << "x (goal on 100mbit: at least 1x).\n";
        j["topk_sync_over_async"] = speedup;
      }
    }
    write_json(work_ + "/dist.json", j);
    write_text(work_ + "/dist.md", md.str());
    std::cout << md.str() << "\nwrote " << work_ << "/dist.json, dist.csv, dist.md in " << fmt(seconds, 0) << " s"
              << std::endl;
  }

  DistBenchOptions o_;
  CommonOptions& c_;  // o_.common
  std::string work_;
  std::string cache_;
  std::string unshare_;
  std::string average_;
  int cores_ = 1;
  int total_threads_ = 1;
  int threads_per_rank_ = 1;
  int straggler_ms_ = 0;  // the straggler rows' --throttle, from the first allreduce run
  std::vector<DistRow> rows_;
};

}  // namespace

const char* link_name(Link l) {
  switch (l) {
    case Link::loopback: return "loopback";
    case Link::gbit1: return "1gbit";
    case Link::mbit100: return "100mbit";
  }
  return "?";
}

const char* grad_compression_name(GradCompression g) {
  switch (g) {
    case GradCompression::none: return "none";
    case GradCompression::fp16: return "fp16";
    case GradCompression::topk: return "topk";
  }
  return "?";
}

CLI::Option* add_dist_flags(CLI::App* app, DistBenchOptions* o) {
  CLI::Option* nproc =
      app->add_option("--nproc", o->nproc,
                      "N >= 2: instead of the ratio table, data-parallel head training at 0.5 with N ranks "
                      "(engine: 1 process, then N with --grad-compression none, fp16, topk and --sync "
                      "average:K, and full fine-tuning's bytes per step) beside the PyTorch DDP peer "
                      "(bench/peers/ddp_peer.py: none, fp16, average:K); --batch is per rank, --threads "
                      "in total (split between the ranks). Writes dist.json, dist.csv, dist.md")
          ->check(CLI::Range(2, 64));
  add_enum_option<Link>(app, "--link", &o->link,
                        {{"loopback", Link::loopback}, {"1gbit", Link::gbit1}, {"100mbit", Link::mbit100}},
                        "with --nproc: loopback (this host's, unshaped), or 1gbit / 100mbit: every "
                        "data-parallel run (engine and peer) inside its own network namespace (unshare -n) "
                        "whose loopback is shaped by tc tbf to that rate; needs root, ip and tc")
      ->needs(nproc);
  add_enum_list_option<GradCompression>(
      app, "--grad-compressions", &o->compressions,
      {{"none", GradCompression::none}, {"fp16", GradCompression::fp16}, {"topk", GradCompression::topk}},
      "with --nproc: the engine's --grad-compression values to run with allreduce (none always runs)")
      ->needs(nproc);
  app->add_option("--average-every", o->average_every, "with --nproc: K of the --sync average:K rows")
      ->check(CLI::Range(1, 1000))
      ->needs(nproc)
      ->capture_default_str();
  app->add_option("--async", o->asyncs,
                  "with --nproc: PUSH:FETCH of the --sync async rows (the first also with topk, and against "
                  "allreduce with a straggler)")
      ->delimiter(',')
      ->needs(nproc)
      ->capture_default_str();
  app->add_flag("--no-straggler{false}", o->straggler,
                "with --nproc: no rows with the last rank slowed to half speed")
      ->needs(nproc);
  app->add_option("--timeout", o->timeout_seconds, "with --nproc: --timeout of every data-parallel run, seconds")
      ->check(CLI::Range(1, 3600))
      ->needs(nproc)
      ->capture_default_str();
  app->add_option("--ddp-peer-script", o->peer_script)->capture_default_str();
  return nproc;
}

void apply_dist_defaults(const CLI::App& app, DistBenchOptions* o) {
  // Medians need a few epochs.
  if (o->common.quick && !given(app, "--epochs")) o->common.epochs = 3;
}

void run_dist_bench(DistBenchOptions options) { DistBench(std::move(options)).run(); }

}  // namespace recycle::bench
