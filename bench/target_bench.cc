#include "bench/target_bench.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/stats.h"
#include "bench/bench_util.h"
#include "bench/report_table.h"
#include "bench/transfer_task.h"

namespace recycle::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Seconds measured round by round (epochs of one run, or one build).
struct Rounds {
  std::vector<std::vector<double>> rounds;

  void add(const json& seconds) {
    rounds.push_back(seconds.is_array() ? seconds.get<std::vector<double>>()
                                        : std::vector<double>{seconds.get<double>()});
  }
  // A second run in the same round: the round's epochs are those of both runs.
  void extend(const json& seconds) {
    if (rounds.empty()) throw std::logic_error("Rounds::extend before any round");
    const std::vector<double> more = seconds.get<std::vector<double>>();
    rounds.back().insert(rounds.back().end(), more.begin(), more.end());
  }
  std::vector<double> all() const {
    std::vector<double> out;
    for (const auto& r : rounds) out.insert(out.end(), r.begin(), r.end());
    return out;
  }
  json to_json() const { return all(); }
};

// The median over rounds of (median of `num` in a round) / (median of `den` in the same round).
// A round runs both side by side, so a machine that slows down for a while (these shared ones
// do, by 10-40% for minutes) slows both sides of a ratio, not one.
double paired_ratio(const Rounds& num, const Rounds& den) {
  std::vector<double> ratios;
  for (size_t r = 0; r < std::min(num.rounds.size(), den.rounds.size()); ++r) {
    ratios.push_back(median(num.rounds[r]) / median(den.rounds[r]));
  }
  return median(ratios);
}

// One training run of the memory rows.
struct MemoryRow {
  int64_t samples = 0;
  int64_t budget_mb = 0;
  int64_t epochs = 1;
  double block_cache_mb = 0;  // what the block cache held at the end (recycle-train's report)
  double cache_mb = 0;
  double peak_mb = 0;
  double samples_per_s = 0;
};

// One row of the table: a measured value against its target.
struct Target {
  std::string measure;
  double value = 0;
  std::string unit;      // "x", " points", " MB"
  bool at_least = true;  // value >= bound (else value <= bound)
  double bound = 0;
  std::string how;       // what was divided by what

  bool met() const { return at_least ? value >= bound : value <= bound; }
  json to_json() const {
    return {{"measure", measure}, {"value", value},        {"unit", unit},
            {"at_least", at_least}, {"target", bound},    {"met", met()},
            {"how", how}};
  }
};

class TargetBench {
 public:
  explicit TargetBench(TargetBenchOptions o) : o_(std::move(o)), c_(o_.common) { out_ = c_.work_dir(); }
  // c_ refers to o_.common: not copied.
  TargetBench(const TargetBench&) = delete;
  TargetBench& operator=(const TargetBench&) = delete;

  void run() {
    ensure_encoder(&c_);
    // Both sides get the same threads: every core unless --threads says otherwise.
    c_.threads = c_.threads_or_cores();
    speed_rounds();
    codec_rows();
    memory_rows();
    report();
  }

 private:
  std::string path(const std::string& name) const { return out_ + "/" + name; }

  std::vector<std::string> train_flags(int64_t epochs, int64_t seed) const {
    return {"--epochs", std::to_string(epochs), "--batch", std::to_string(c_.batch), "--seed",
            std::to_string(seed), "--threads", std::to_string(c_.threads), "--json"};
  }

  // recycle-build of `split` at `ratio` into `cache` (a fresh one for the train split).
  ChildRun build(const std::string& cache, const std::string& split, double ratio,
                 const std::string& codec, const std::string& classes, int64_t limit) {
    std::vector<std::string> argv = {c_.tool("recycle-build"), "--data", "fashion-mnist", "--classes",
                                     classes, "--split", split, "--weights", c_.weights,
                                     "--recycle", fmt(ratio, 2), "--codec", codec, "--cache",
                                     cache, "--threads", std::to_string(c_.threads), "--json"};
    if (split == "train") argv.insert(argv.end(), {"--rebuild", "--limit", std::to_string(limit)});
    ChildRun r = run_child(argv, out_);
    // The kernel writes a build's files back in the half minute after it: now, not while the
    // next run is timed (without this sync, the first run after a build was 10-20% slower).
    ::sync();
    return r;
  }

  // Engine and peer in turn, o_.rounds times: full fine-tuning, the 0.5 build and head epochs.
  void speed_rounds() {
    const std::string cache = path("targets-r50");
    const std::string threads = std::to_string(c_.threads);
    for (int64_t round = 0; round < o_.rounds; ++round) {
      const std::string of = " (round " + std::to_string(round + 1) + "/" + std::to_string(o_.rounds) + ")";
      note("engine: full fine-tuning" + of);
      std::vector<std::string> full = {c_.tool("recycle-train"), "--data", "fashion-mnist", "--classes",
                                       "5-9", "--limit", std::to_string(c_.samples), "--weights",
                                       c_.weights, "--recycle", "0", "--eval-split", "none"};
      for (const auto& f : train_flags(c_.epochs, round)) full.push_back(f);
      engine_full_.add(run_child(full, out_).result.at("epoch_seconds"));

      note("engine: build at 0.5" + of);
      const json b = build(cache, "train", 0.5, "fp32", "5-9", c_.samples).result;
      build_seconds_.add(b.at("seconds"));
      if (b.contains("prefix_seconds")) prefix_share_.push_back(b.at("prefix_seconds").get<double>() / b.at("seconds").get<double>());

      // The engine's head from the cache beside its two references, the peer's head in a
      // process of its own and the engine's head from a preloaded split, in an order symmetric
      // in time: preloaded, cache, peer, cache, preloaded. Each side's runs are centred on the
      // round's middle, so a machine that drifts steadily within the round (these do, within a
      // minute) moves all three alike. A round of an engine side holds both its runs' epochs.
      // recycle-train's head on the round's cache for `epochs`, with `flags`: its report.
      auto head_run = [&](std::vector<std::string> flags, int64_t epochs) {
        std::vector<std::string> argv = {c_.tool("recycle-train"), "--cache", cache, "--eval-split", "none"};
        argv.insert(argv.end(), flags.begin(), flags.end());
        for (const auto& f : train_flags(epochs, round)) argv.push_back(f);
        return run_child(argv, out_).result;
      };
      // The head with `flags` into `side`: the round's first run, or its second (`second`).
      auto engine_head = [&](const std::string& what, const std::vector<std::string>& flags,
                             Rounds& side, bool second) {
        note("engine: head from the cache" + what + of);
        const json seconds = head_run(flags, c_.epochs).at("epoch_seconds");
        second ? side.extend(seconds) : side.add(seconds);
      };
      engine_head(", preloaded", {"--preload"}, engine_preloaded_, false);
      engine_head("", {}, engine_head_, false);
      note("eager PyTorch peer: head only" + of);
      peer_head_.add(run_child(peer_argv(round, "--head-only"), out_).result.at("head_epoch_seconds"));
      engine_head("", {}, engine_head_, true);
      engine_head(", preloaded", {"--preload"}, engine_preloaded_, true);
      // The reads row: one run whose epochs take turns, a second apart, from the cache and
      // from the split preloaded (--alternate-preload: cache, preloaded, preloaded, cache,
      // ...). The budget leaves the cache side at least the block cache of the runs above
      // (the preloaded split takes a share of it).
      note("engine: head epochs alternating between the cache and the preloaded split" + of);
      const json a = head_run({"--alternate-preload", "--memory-budget", "512"}, 2 * c_.epochs);
      std::vector<double> from_cache, from_memory;
      for (size_t e = 0; e < a.at("epoch_sources").size(); ++e) {
        const double seconds = a.at("epoch_seconds").at(e).get<double>();
        (a.at("epoch_sources").at(e) == "cache" ? from_cache : from_memory).push_back(seconds);
      }
      alternating_cache_.add(from_cache);
      alternating_preloaded_.add(from_memory);

      // bf16 mixed precision on both sides (printed under the table, not a target): the
      // engine's head, the peer's under torch.autocast, the engine's again.
      engine_head(", --precision bf16", {"--precision", "bf16"}, engine_bf16_, false);
      note("eager PyTorch peer: head only, bf16 autocast" + of);
      std::vector<std::string> peer_bf16 = peer_argv(round, "--head-only");
      peer_bf16.insert(peer_bf16.end(), {"--precision", "bf16"});
      peer_bf16_.add(run_child(peer_bf16, out_).result.at("head_epoch_seconds"));
      engine_head(", --precision bf16", {"--precision", "bf16"}, engine_bf16_, true);

      note("engine: build of the whole training split at 0.5" + of);
      const json whole = build(path("targets-r50-all"), "train", 0.5, "fp16", "5-9", 0).result;
      whole_build_seconds_.add(whole.at("seconds"));
      whole_samples_ = whole.at("samples").get<int64_t>();
      note("eager PyTorch peer: prefix pass over the whole split" + of);
      peer_whole_prefix_.add(run_child({c_.python, c_.peer_script, "--classes", "5-9", "--limit", "0",
                                              "--prefix-only", "--threads", threads},
                                             out_).result.at("prefix_seconds"));

      note("eager PyTorch peer" + of);
      const json p = run_child(peer_argv(round, ""), out_).result;
      peer_full_.add(p.at("full_epoch_seconds"));
      peer_head_after_full_.add(p.at("head_epoch_seconds"));
      peer_prefix_.add(p.at("prefix_seconds"));
    }
  }

  // The peer on the speed rounds' samples; `part` is empty or one of its --*-only flags.
  std::vector<std::string> peer_argv(int64_t round, const std::string& part) const {
    std::vector<std::string> argv = {c_.python, c_.peer_script, "--classes", "5-9", "--limit",
                                     std::to_string(c_.samples), "--epochs",
                                     std::to_string(c_.epochs), "--batch", std::to_string(c_.batch),
                                     "--threads", std::to_string(c_.threads), "--seed",
                                     std::to_string(round)};
    if (!part.empty()) argv.push_back(part);
    return argv;
  }

  // The 0.5 cache in fp32 and in int8: bytes per record and test accuracy over the seeds.
  void codec_rows() {
    for (const std::string codec : {"fp32", "int8"}) {
      const std::string cache = path("targets-r50-" + codec);
      note("engine: " + codec + " cache at 0.5, " + seeds_text());
      const json b = build(cache, "train", 0.5, codec, "5-9", c_.samples).result;
      build(cache, "test", 0.5, codec, "5-9", 0);
      record_bytes_[codec] = b.at("bytes").get<double>() / std::max<int64_t>(1, b.at("computed").get<int64_t>());
      accuracy_[codec] = test_accuracies(cache, {});
      if (codec != "fp32") continue;
      // The same fp32 records, the head trained in bf16 mixed precision.
      note("engine: the fp32 cache trained with --precision bf16, " + seeds_text());
      accuracy_["fp32, bf16 training"] = test_accuracies(cache, {"--precision", "bf16"});
    }
  }

  // "3 seeds" (or "1 seed").
  std::string seeds_text() const {
    return std::to_string(c_.seeds) + (c_.seeds == 1 ? " seed" : " seeds");
  }

  // The test accuracy of recycle-train on `cache` with `flags`, for each seed.
  std::vector<double> test_accuracies(const std::string& cache, const std::vector<std::string>& flags) {
    std::vector<double> out;
    for (int64_t seed = 0; seed < c_.seeds; ++seed) {
      std::vector<std::string> argv = {c_.tool("recycle-train"), "--cache", cache};
      argv.insert(argv.end(), flags.begin(), flags.end());
      for (const auto& f : train_flags(c_.epochs, seed)) argv.push_back(f);
      out.push_back(run_child(argv, out_).result.at("test_acc").get<double>());
    }
    return out;
  }

  // Caches of N samples at 0.25 (fp32, classes 0-9) trained for one epoch within the budget,
  // and one that fits in it. The one that fits and the largest are kept for the rounds.
  void memory_rows() {
    const std::string probe = path("targets-mem-probe");
    const json p = build(probe, "train", 0.25, "fp32", "0-9", 64).result;
    record_bytes_r25_ = p.at("bytes").get<double>() / std::max<int64_t>(1, p.at("computed").get<int64_t>());
    fs::remove_all(probe);
    const int64_t fits = std::max<int64_t>(
        c_.batch, static_cast<int64_t>(0.5 * o_.budget_mb * 1048576.0 / record_bytes_r25_));
    std::vector<int64_t> sizes = {fits};
    sizes.insert(sizes.end(), o_.memory_samples.begin(), o_.memory_samples.end());
    auto cache_of = [&](int64_t n) { return path("targets-mem-" + std::to_string(n)); };
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = sizes[i];
      note("engine: " + std::to_string(n) + " samples at 0.25 in fp32 with --memory-budget " +
           std::to_string(o_.budget_mb));
      build(cache_of(n), "train", 0.25, "fp32", "0-9", n);
      memory_.push_back(train_within(cache_of(n), n, o_.budget_mb, 1));
      // gigabytes: keep only the one that fits and the largest
      if (i != 0 && i + 1 != sizes.size()) fs::remove_all(cache_of(n));
    }
    // Rounds side by side: the cache that fits (for as many steps as the largest's epoch) and
    // the largest within the budget, and the largest within a small budget too, which measures
    // the model: the peak RSS of the same training (the same samples and steps) beyond its
    // budget.
    const int64_t largest = sizes.back();
    const int64_t fits_epochs = (largest + fits - 1) / fits;
    for (int64_t round = 0; round < o_.rounds; ++round) {
      const std::string of = " (round " + std::to_string(round + 1) + "/" + std::to_string(o_.rounds) + ")";
      note("engine: " + std::to_string(fits) + " and " + std::to_string(largest) +
           " samples within --memory-budget " + std::to_string(o_.budget_mb) + ", and " +
           std::to_string(largest) + " within " + std::to_string(model_budget_mb()) + of);
      fits_rounds_.push_back(train_within(cache_of(fits), fits, o_.budget_mb, fits_epochs));
      largest_rounds_.push_back(train_within(cache_of(largest), largest, o_.budget_mb, 1));
      model_rounds_.push_back(train_within(cache_of(largest), largest, model_budget_mb(), 1));
    }
    fs::remove_all(cache_of(fits));
    fs::remove_all(cache_of(largest));
  }

  // The small budget of the model rounds: an eighth of the budget (at least the 16 MiB
  // recycle-train takes).
  int64_t model_budget_mb() const { return std::max<int64_t>(16, o_.budget_mb / 8); }

  // `epochs` of `cache` (n samples) within --memory-budget budget_mb: peak RSS and rate.
  MemoryRow train_within(const std::string& cache, int64_t n, int64_t budget_mb, int64_t epochs) {
    std::vector<std::string> argv = {c_.tool("recycle-train"), "--cache", cache, "--eval-split", "none",
                                     "--memory-budget", std::to_string(budget_mb)};
    for (const auto& f : train_flags(epochs, 0)) argv.push_back(f);
    const ChildRun r = run_child(argv, out_);
    MemoryRow row;
    row.epochs = epochs;
    row.block_cache_mb = r.result.at("memory").at("block_cache_used_bytes").get<double>() / 1048576.0;
    row.samples = n;
    row.budget_mb = budget_mb;
    row.cache_mb = n * record_bytes_r25_ / 1048576.0;
    row.peak_mb = r.peak_mb;
    row.samples_per_s = r.result.at("train_samples_per_s").get<double>();
    return row;
  }

  void report() {
    std::vector<Target> t;
    // Speed ratios: paired round by round (paired_ratio), medians over the rounds.
    t.push_back({"head epoch at 0.5 from the cache / the peer's from in-memory activations",
                 paired_ratio(peer_head_, engine_head_), "x", true, 1.2,
                 "peer median epoch s (its own process, next to the engine's run) / engine "
                 "median epoch s, per round"});
    t.push_back({"full fine-tuning epoch / the peer's", paired_ratio(peer_full_, engine_full_),
                 "x", true, 1.0, "peer median epoch s / engine median epoch s, per round"});
    t.push_back({"head epoch from the cache / from the same split preloaded in memory",
                 paired_ratio(alternating_preloaded_, alternating_cache_), "x", true, 0.97,
                 "preloaded median epoch s / cache median epoch s, the epochs taking turns in "
                 "one run (--alternate-preload), per round"});
    t.push_back({"recycle-build at 0.5 of the whole split (" + std::to_string(whole_samples_) +
                     " samples) / the peer's no-grad prefix pass over it",
                 paired_ratio(peer_whole_prefix_, whole_build_seconds_), "x", true, 1.5,
                 "peer prefix s / engine build report s (fp16 records), per round"});
    t.push_back({"int8 record bytes / fp32", record_bytes_.at("int8") / record_bytes_.at("fp32"),
                 "x", false, 0.3, "bytes per record, 0.5 cache"});
    t.push_back({"int8 test accuracy - fp32 (mean of " + seeds_text() + ")",
                 100.0 * (mean(accuracy_.at("int8")) - mean(accuracy_.at("fp32"))), " points", true,
                 -0.5, "percentage points"});
    std::vector<double> throughput, over, model, over_fits, model_fits;
    for (size_t r = 0; r < largest_rounds_.size(); ++r) {
      const MemoryRow& big = largest_rounds_[r];
      throughput.push_back(big.samples_per_s / fits_rounds_[r].samples_per_s);
      model.push_back(model_rounds_[r].peak_mb - model_rounds_[r].budget_mb);
      over.push_back(big.peak_mb - (o_.budget_mb + model.back()));
      // The other measure of the model: the run that fits, less what its block cache held.
      model_fits.push_back(fits_rounds_[r].peak_mb - fits_rounds_[r].block_cache_mb);
      over_fits.push_back(big.peak_mb - (o_.budget_mb + model_fits.back()));
    }
    const MemoryRow& largest = memory_.back();
    const std::string rounds = std::to_string(largest_rounds_.size()) + " rounds";
    t.push_back({"largest cache / memory budget", largest.cache_mb / o_.budget_mb, "x", true, 4.0,
                 std::to_string(largest.samples) + " samples at 0.25, fp32"});
    t.push_back({"throughput of the largest cache / of one that fits the budget", median(throughput),
                 "x", true, 0.9,
                 "samples/s (median epoch), " + std::to_string(largest.samples) + " against " +
                     std::to_string(memory_.front().samples) + " samples, median of " + rounds});
    // The model: what the same training (the largest cache, one epoch) takes beyond a small
    // budget: raising the budget from there must cost no more memory than it adds.
    t.push_back({"peak RSS of the largest cache - (budget + the model)", median(over), " MB", false,
                 0.0,
                 "the model: the same run's peak RSS within --memory-budget " +
                     std::to_string(model_budget_mb()) + ", less that budget (" +
                     fmt(median(model), 0) + " MB); median of " + rounds});

    Table targets({"measure", "value", "target", "met"});
    json j;
    for (const Target& x : t) {
      targets.add_row({x.measure, fmt(x.value, 2) + x.unit, (x.at_least ? ">= " : "<= ") + fmt(x.bound, 2) + x.unit,
                       x.met() ? "yes" : "**no**"});
      j["targets"].push_back(x.to_json());
    }
    std::ostringstream md;
    md << targets.markdown();
    const double small_build = paired_ratio(peer_prefix_, build_seconds_);
    md << "\nrecycle-build of " << c_.samples << " samples (fp32 records) / the peer's prefix pass "
       << "over them: " << fmt(small_build, 2) << "x";
    j["build_over_peer_prefix_samples"] = small_build;
    if (!prefix_share_.empty()) {
      md << "; share of that build's time outside the prefix's forward (reading and keying the "
            "whole image file, encoding, writing, opening and flushing the cache): "
         << fmt(100.0 * (1.0 - median(prefix_share_)), 1) << "%";
      j["build_outside_prefix_share"] = 1.0 - median(prefix_share_);
    }
    md << "\n";
    const double head_after_full = paired_ratio(peer_head_after_full_, engine_head_);
    md << "\nHead epoch at 0.5 from the cache / the peer's head epoch in the process that did its "
          "full fine-tuning first (an older measure, kept for comparison): "
       << fmt(head_after_full, 2) << "x\n";
    j["head_over_peer_head_after_full"] = head_after_full;
    const double reads_by_runs = paired_ratio(engine_preloaded_, engine_head_);
    md << "\nHead epoch from the cache / from the preloaded split, measured by whole runs (the "
          "older measure, kept for comparison: the cache's and the preloaded runs' median epochs, per round): "
       << fmt(reads_by_runs, 2) << "x\n";
    j["reads_by_runs"] = reads_by_runs;
    const double bf16_points =
        100.0 * (mean(accuracy_.at("fp32, bf16 training")) - mean(accuracy_.at("fp32")));
    const double bf16_over_peer = paired_ratio(peer_bf16_, engine_bf16_);
    const double bf16_over_fp32 = paired_ratio(engine_head_, engine_bf16_);
    const double peer_bf16_over_fp32 = paired_ratio(peer_head_, peer_bf16_);
    md << "\nbf16 mixed precision (`--precision bf16`; not a target, the rows above are fp32): head "
          "epoch at 0.5 from the cache / the peer's under bf16 autocast (engine, peer, engine, per "
          "round): "
       << fmt(bf16_over_peer, 2) << "x; the engine's head in bf16 / in fp32 (the round's runs "
       << "from the cache): " << fmt(bf16_over_fp32, 2) << "x; the peer's in bf16 / in fp32: "
       << fmt(peer_bf16_over_fp32, 2) << "x; test accuracy in bf16 - fp32 (the fp32 cache, mean of "
       << seeds_text() << "): " << fmt(bf16_points, 2) << " points\n";
    j["bf16"] = {{"head_over_peer_bf16", bf16_over_peer},
                 {"head_bf16_over_fp32", bf16_over_fp32},
                 {"peer_head_bf16_over_fp32", peer_bf16_over_fp32},
                 {"accuracy_points", bf16_points}};
    md << "\nThe model measured instead as the run that fits the budget (trained for as many steps "
          "as the largest) less what its block cache held: "
       << fmt(median(model_fits), 0) << " MB; peak RSS of the largest cache - (budget + that): "
       << fmt(median(over_fits), 2) << " MB (median of " << rounds << ").\n";
    j["over_budget_plus_fitting_run_mb"] = median(over_fits);
    Table memory({"samples at 0.25 (fp32)", "epochs", "cache MB", "--memory-budget MB", "block cache MB at the end",
                  "peak RSS MB", "samples/s"});
    auto memory_row = [&](const MemoryRow& m, const std::string& note) {
      memory.add_row({std::to_string(m.samples) + note, std::to_string(m.epochs), fmt(m.cache_mb, 0),
                      std::to_string(m.budget_mb), fmt(m.block_cache_mb, 0), fmt(m.peak_mb, 0),
                      fmt(m.samples_per_s, 0)});
      return json{{"samples", m.samples},         {"epochs", m.epochs},
                  {"cache_mb", m.cache_mb},       {"budget_mb", m.budget_mb},
                  {"block_cache_mb", m.block_cache_mb}, {"peak_rss_mb", m.peak_mb},
                  {"samples_per_s", m.samples_per_s}};
    };
    for (const MemoryRow& m : memory_) j["memory"].push_back(memory_row(m, ""));
    for (size_t r = 0; r < largest_rounds_.size(); ++r) {
      const std::string of = " (round " + std::to_string(r + 1) + ")";
      j["memory_rounds"].push_back({{"fits", memory_row(fits_rounds_[r], of)},
                                    {"largest", memory_row(largest_rounds_[r], of)},
                                    {"model", memory_row(model_rounds_[r], of)}});
    }
    md << "\n" << memory.markdown();
    j["epoch_seconds"] = {{"engine_full", engine_full_.rounds}, {"peer_full", peer_full_.rounds},
                          {"engine_head_cache", engine_head_.rounds},
                          {"engine_head_preloaded", engine_preloaded_.rounds},
                          {"alternating_cache", alternating_cache_.rounds},
                          {"alternating_preloaded", alternating_preloaded_.rounds},
                          {"peer_head", peer_head_.rounds},
                          {"engine_head_bf16", engine_bf16_.rounds},
                          {"peer_head_bf16", peer_bf16_.rounds},
                          {"peer_head_after_full", peer_head_after_full_.rounds}};
    j["build_seconds"] = build_seconds_.to_json();
    j["whole_split_build_seconds"] = whole_build_seconds_.to_json();
    j["peer_whole_split_prefix_seconds"] = peer_whole_prefix_.to_json();
    j["peer_prefix_seconds"] = peer_prefix_.to_json();
    j["accuracy"] = accuracy_;
    j["record_bytes"] = record_bytes_;
    j["options"] = c_.to_json();
    j["options"].update({{"rounds", o_.rounds},
                         {"batch", c_.batch},
                         {"threads", c_.threads},
                         {"budget_mb", o_.budget_mb},
                         {"memory_samples", o_.memory_samples}});
    write_json(path("targets.json"), j);
    write_text(path("targets.md"), md.str());
    std::cout << md.str() << "\nwrote " << path("targets.md") << " and targets.json" << std::endl;
  }

  TargetBenchOptions o_;
  CommonOptions& c_;  // o_.common; threads resolved to a count
  std::string out_;   // the output directory, absolute
  Rounds engine_full_, engine_head_, engine_preloaded_, build_seconds_;
  // The epochs of the --alternate-preload runs, by source.
  Rounds alternating_cache_, alternating_preloaded_;
  std::vector<double> prefix_share_;
  // The peer's head epochs in a --head-only process; and in the process that did full
  // fine-tuning first (an older measure, kept for comparison).
  Rounds peer_full_, peer_head_, peer_head_after_full_, peer_prefix_;
  // The head in bf16 mixed precision: the engine's from the cache, the peer's head-only.
  Rounds engine_bf16_, peer_bf16_;
  Rounds whole_build_seconds_, peer_whole_prefix_;
  int64_t whole_samples_ = 0;
  std::map<std::string, double> record_bytes_;
  std::map<std::string, std::vector<double>> accuracy_;
  double record_bytes_r25_ = 0;
  std::vector<MemoryRow> memory_;  // one run per size, the one that fits first
  std::vector<MemoryRow> fits_rounds_, largest_rounds_, model_rounds_;
};

}  // namespace

CLI::Option* add_target_flags(CLI::App* app, TargetBenchOptions* o) {
  CLI::Option* targets = app->add_flag(
      "--targets", o->selected,
      "instead of the ratio table, the performance targets beside the eager PyTorch peer, each a "
      "ratio with its target (head and full fine-tuning epochs, reads against a preloaded split, "
      "build against the peer's prefix pass, int8 against fp32, training within a memory "
      "budget; see docs/performance.md). Writes targets.md, targets.json");
  app->add_option("--rounds", o->rounds,
                  "with --targets: rounds of the speed ratios (engine and peer) and of the memory runs")
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->needs(targets)
      ->capture_default_str();
  app->add_option("--memory-budget", o->budget_mb, "with --targets: --memory-budget MiB of the memory rows")
      ->check(CLI::Range(int64_t{32}, int64_t{1} << 20))
      ->needs(targets)
      ->capture_default_str();
  app->add_option("--memory-samples", o->memory_samples,
                  "with --targets: training samples (of all 10 classes, at 0.25, fp32) of the memory rows")
      ->check(CLI::Range(int64_t{128}, int64_t{60000}))
      ->delimiter(',')
      ->needs(targets)
      ->capture_default_str();
  return targets;
}

void apply_target_defaults(const CLI::App& app, TargetBenchOptions* o) {
  if (!o->common.quick) return;
  if (!given(app, "--epochs")) o->common.epochs = 3;
  // int8 against fp32 needs its seeds.
  if (!given(app, "--seeds")) o->common.seeds = 3;
  if (!given(app, "--rounds")) o->rounds = 2;
  if (!given(app, "--memory-budget")) o->budget_mb = 64;
  if (!given(app, "--memory-samples")) o->memory_samples = {2500, 6000};
}

void run_target_bench(TargetBenchOptions options) { TargetBench(std::move(options)).run(); }

}  // namespace recycle::bench
