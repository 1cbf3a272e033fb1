#include "bench/progressive_bench.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/stats.h"
#include "bench/bench_util.h"
#include "bench/report_table.h"
#include "bench/transfer_task.h"
#include "recycle/options.h"  // parse_freeze_rule

namespace recycle::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One configuration over every seed, and its --nproc run.
struct Row {
  std::string kind;                   // full | fixed | rule
  std::string rule;                   // the --freeze spec (rules)
  std::vector<double> accuracy;
  std::vector<double> run_seconds;    // wall time of each training command
  std::vector<double> level_seconds;  // rules: making levels, inside run_seconds
  std::vector<double> final_ratio;    // rules: blocks frozen at the end / blocks
  double build_seconds = 0;           // fixed: the cache build (train and test splits)
  std::string freezes;                // rules, seed 0: "epoch:blocks" of each freeze
  double dp_accuracy = -1;            // the --nproc run
  double dp_bytes_per_step = 0;       // over the whole --nproc run, per rank
  std::vector<double> dp_phase_bytes; // per phase (per trainable set)

  double total() const { return build_seconds + median(run_seconds); }
  std::string label(double fixed_ratio) const {
    if (kind == "full") return "full fine-tuning";
    if (kind == "fixed") return "fixed " + fmt(fixed_ratio, 2) + " (cache)";
    return "progressive " + rule;
  }
};

std::string bytes(double b) { return bytes_text(b); }

// `rule` as recycle-train parses --freeze; kNone for one it refuses.
FreezeRule freeze_rule(const std::string& rule) {
  try {
    return parse_freeze_rule(rule);
  } catch (const std::invalid_argument&) {
    return FreezeRule();
  }
}

class ProgressiveBench {
 public:
  explicit ProgressiveBench(ProgressiveBenchOptions o) : o_(std::move(o)), c_(o_.common) {
    work_ = c_.work_dir();
  }
  // c_ refers to o_.common: not copied.
  ProgressiveBench(const ProgressiveBench&) = delete;
  ProgressiveBench& operator=(const ProgressiveBench&) = delete;

  void run() {
    ensure_encoder(&c_);
    if (!o_.composer_python.empty()) return beside_composer();
    std::vector<Row> rows;
    rows.push_back(full());
    rows.push_back(fixed());
    for (const std::string& rule : o_.rules) rows.push_back(progressive(rule));
    report(rows);
  }

 private:
  std::vector<std::string> raw_data() const {
    return {"--data", "fashion-mnist", "--classes", "5-9", "--limit", std::to_string(c_.samples),
            "--weights", c_.weights, "--recycle", "0"};
  }
  std::vector<std::string> common(int64_t seed) const {
    return {"--epochs", std::to_string(c_.epochs), "--batch", std::to_string(c_.batch),
            "--seed", std::to_string(seed), "--threads", std::to_string(c_.threads), "--json"};
  }
  std::vector<std::string> dp_flags() const {
    return {"--nproc", std::to_string(o_.nproc), "--timeout", std::to_string(o_.timeout_seconds)};
  }

  // Runs one configuration's command for every seed, then with --nproc for seed 0.
  // `argv_for(seed, run)` gives the command (run names a fresh directory where one is needed).
  template <typename Argv>
  void run_seeds(Row* r, const std::string& label, Argv argv_for) {
    for (int64_t seed = 0; seed < c_.seeds; ++seed) {
      note(label + ", seed " + std::to_string(seed));
      const ChildRun c = run_child(argv_for(seed, "s" + std::to_string(seed)), work_);
      r->accuracy.push_back(c.result.at("test_acc").get<double>());
      r->run_seconds.push_back(c.seconds);
      if (r->kind == "rule") {
        r->level_seconds.push_back(c.result.at("level_seconds").get<double>());
        r->final_ratio.push_back(c.result.at("recycle").get<double>());
        if (seed == 0) {
          std::string f;
          for (const json& e : c.result.at("freezes")) {
            f += (f.empty() ? "" : ", ") + std::string("epoch ") + e.at("epoch").dump() + ": " +
                 e.at("to_blocks").dump();
          }
          r->freezes = f.empty() ? "none" : f;
        }
      }
    }
    note(label + ", " + std::to_string(o_.nproc) + " processes, seed 0");
    std::vector<std::string> argv = argv_for(0, "dp");
    append(&argv, dp_flags());
    const json j = run_child(argv, work_).result;
    if (j.value("world_size", 0) != o_.nproc) {
      throw std::runtime_error(label + " with --nproc " + std::to_string(o_.nproc) +
                               " reported world_size " + j.value("world_size", json(nullptr)).dump());
    }
    r->dp_accuracy = j.at("test_acc").is_number() ? j["test_acc"].get<double>() : -1;
    r->dp_bytes_per_step = j.at("bytes_per_step").get<double>();
    for (const json& p : j.at("comm_phases")) r->dp_phase_bytes.push_back(p.at("bytes_per_step").get<double>());
  }

  Row full() {
    Row r;
    r.kind = "full";
    run_seeds(&r, "full fine-tuning", [&](int64_t seed, const std::string&) {
      std::vector<std::string> argv = {c_.tool("recycle-train")};
      append(&argv, raw_data());
      append(&argv, common(seed));
      return argv;
    });
    return r;
  }

  Row fixed() {
    Row r;
    r.kind = "fixed";
    const std::string cache = work_ + "/progressive-fixed-cache";
    const std::string label = r.label(o_.fixed_ratio);
    note(label + ": building the cache");
    for (const std::string split : {"train", "test"}) {
      std::vector<std::string> argv = {c_.tool("recycle-build"), "--data", "fashion-mnist",
                                       "--classes", "5-9", "--split", split, "--weights",
                                       c_.weights, "--recycle", fmt(o_.fixed_ratio, 3), "--codec",
                                       codec_name(c_.codec), "--cache", cache, "--threads",
                                       std::to_string(c_.threads), "--json"};
      if (split == "train") append(&argv, {"--rebuild", "--limit", std::to_string(c_.samples)});
      r.build_seconds += run_child(argv, work_).seconds;
    }
    run_seeds(&r, label, [&](int64_t seed, const std::string&) {
      std::vector<std::string> argv = {c_.tool("recycle-train"), "--cache", cache};
      append(&argv, common(seed));
      return argv;
    });
    return r;
  }

  Row progressive(const std::string& rule) {
    Row r;
    r.kind = "rule";
    r.rule = rule;
    // A fresh levels directory: every level of the run is made inside it (timed).
    run_seeds(&r, r.label(o_.fixed_ratio),
              [&](int64_t seed, const std::string& run) { return rule_argv(rule, seed, run); });
    return r;
  }

  // The engine's run of `rule` with `seed` in a fresh levels directory.
  std::vector<std::string> rule_argv(const std::string& rule, int64_t seed,
                                     const std::string& run) const {
    const std::string levels = work_ + "/progressive-levels/" + rule + "-" + run;
    fs::remove_all(levels);
    std::vector<std::string> argv = {c_.tool("recycle-train")};
    append(&argv, raw_data());
    append(&argv, {"--freeze", rule, "--levels", levels, "--level-codec", codec_name(c_.codec)});
    append(&argv, common(seed));
    return argv;
  }

  // Each linear rule beside Composer's LayerFreezing with the same schedule, seeds alternating.
  void beside_composer() {
    Table table({"rule", "engine acc (median)", "Composer acc (median)", "engine s (median)",
                 "Composer s (median, command)", "Composer s (median, after imports)",
                 "speed-up (commands)", "speed-up (after imports)", "target"});
    json j;
    j["options"] = c_.to_json();
    j["options"].update({{"batch", c_.batch},
                         {"threads", c_.threads},
                         {"codec", codec_name(c_.codec)},
                         {"composer_python", o_.composer_python}});
    for (const std::string& rule : o_.rules) {
      const FreezeRule parsed = freeze_rule(rule);
      if (parsed.kind != FreezeRule::Kind::kLinear) {
        note(rule + ": not linear, Composer has no such rule: left out");
        continue;
      }
      const double start = parsed.start, level = parsed.level;
      std::vector<double> acc, secs, peer_acc, peer_secs, peer_own;
      json engine_runs = json::array();  // where each engine run's time went (its --json)
      for (int64_t seed = 0; seed < c_.seeds; ++seed) {
        note("progressive " + rule + ", seed " + std::to_string(seed));
        const ChildRun e = run_child(rule_argv(rule, seed, "c" + std::to_string(seed)), work_);
        acc.push_back(e.result.at("test_acc").get<double>());
        secs.push_back(e.seconds);
        engine_runs.push_back({{"wall_seconds", e.seconds},
                               {"seconds", e.result.at("seconds")},
                               {"epoch_seconds", e.result.at("epoch_seconds")},
                               {"epoch_sources", e.result.at("epoch_sources")},
                               {"level_seconds", e.result.at("level_seconds")}});
        note("Composer LayerFreezing(" + fmt(start, 2) + ", " + fmt(level, 2) + "), seed " +
             std::to_string(seed));
        const ChildRun p =
            run_child({o_.composer_python, o_.composer_script, "--weights", c_.weights, "--limit",
                       std::to_string(c_.samples), "--epochs", std::to_string(c_.epochs), "--batch",
                       std::to_string(c_.batch), "--threads", std::to_string(c_.threads_or_cores()),
                       "--seed", std::to_string(seed), "--freeze-start", csv_number(start),
                       "--freeze-level", csv_number(level)},
                      work_);
        peer_acc.push_back(p.result.at("test_acc").get<double>());
        peer_secs.push_back(p.seconds);
        peer_own.push_back(p.result.at("seconds").get<double>());
      }
      const double speedup = median(peer_secs) / median(secs);
      const double speedup_own = median(peer_own) / median(secs);
      // End to end: each command's wall time, start to test accuracy (Composer's imports are a
      // part of a Composer run; the speed-up after them is printed beside).
      const bool met = speedup >= 1.5 && median(acc) >= median(peer_acc) - 0.005;
      table.add_row({rule, fmt(median(acc), 4), fmt(median(peer_acc), 4), fmt(median(secs), 1),
                     fmt(median(peer_secs), 1), fmt(median(peer_own), 1), fmt(speedup, 2) + "x",
                     fmt(speedup_own, 2) + "x", met ? "met" : "not met"});
      j["rows"].push_back({{"rule", rule},
                           {"accuracy", acc},
                           {"seconds", secs},
                           {"composer_accuracy", peer_acc},
                           {"composer_seconds", peer_secs},
                           {"composer_seconds_after_imports", peer_own},
                           {"engine_runs", engine_runs},
                           {"speedup", speedup},
                           {"speedup_after_imports", speedup_own},
                           {"target_met", met}});
    }
    std::ostringstream md;
    md << "Progressive recycling beside Composer's LayerFreezing on Fashion-MNIST classes 5-9: "
       << c_.samples << " samples, " << c_.epochs << " epochs, batch " << c_.batch << ", "
       << c_.threads_or_cores() << " threads, " << c_.seeds << " seeds (alternating).\n\n"
       << table.markdown()
       << "\nTarget (issue 70): the engine's command >= 1.5x faster than Composer's, end to end "
          "(medians of the commands' wall times), at a median accuracy >= Composer's - 0.005.\n";
    write_json(work_ + "/composer.json", j);
    write_text(work_ + "/composer.md", md.str());
    std::cout << md.str() << "\nwrote " << work_ << "/composer.json, composer.md" << std::endl;
  }

  void report(const std::vector<Row>& rows) {
    const Row& full = rows[0];
    const Row& fixed = rows[1];
    std::ostringstream md;
    md << "Progressive recycling on Fashion-MNIST classes 5-9: " << c_.samples << " samples, "
       << c_.epochs << " epochs, batch " << c_.batch << ", " << c_.seeds << " seed"
       << (c_.seeds == 1 ? "" : "s") << "; bytes per step per rank with --nproc " << o_.nproc
       << " (fp32 allreduce, seed 0).\n\n";
    Table table({"configuration", "test acc (mean ± sd)", "total s (builds included)", "total / fixed",
                 "levels or build s", "frozen at end", "freezes (seed 0: epoch: blocks)",
                 "bytes/step --nproc " + std::to_string(o_.nproc), "per phase",
                 "acc --nproc " + std::to_string(o_.nproc)});
    json j;
    j["options"] = c_.to_json();
    j["options"].update({{"batch", c_.batch},
                         {"threads", c_.threads},
                         {"codec", codec_name(c_.codec)},
                         {"nproc", o_.nproc},
                         {"fixed_ratio", o_.fixed_ratio},
                         {"rules", o_.rules}});
    for (const Row& r : rows) {
      std::string phases;
      for (double b : r.dp_phase_bytes) phases += (phases.empty() ? "" : " → ") + bytes(b);
      table.add_row({r.label(o_.fixed_ratio), fmt(mean(r.accuracy), 4) + " ± " + fmt(stddev(r.accuracy), 4),
                     fmt(r.total(), 1), fmt(r.total() / fixed.total(), 2),
                     r.kind == "rule"    ? fmt(median(r.level_seconds), 1)
                     : r.kind == "fixed" ? fmt(r.build_seconds, 1)
                                         : "-",
                     r.kind == "rule"    ? fmt(mean(r.final_ratio), 3)
                     : r.kind == "fixed" ? fmt(o_.fixed_ratio, 3)
                                         : "0",
                     r.kind == "rule" ? r.freezes : "-", bytes(r.dp_bytes_per_step),
                     r.dp_phase_bytes.size() > 1 ? phases : "-",
                     r.dp_accuracy >= 0 ? fmt(r.dp_accuracy, 4) : "-"});
      j["rows"].push_back({{"label", r.label(o_.fixed_ratio)},
                           {"kind", r.kind},
                           {"rule", r.rule},
                           {"accuracy", r.accuracy},
                           {"acc_mean", mean(r.accuracy)},
                           {"acc_std", stddev(r.accuracy)},
                           {"run_seconds", r.run_seconds},
                           {"build_seconds", r.build_seconds},
                           {"level_seconds", r.level_seconds},
                           {"final_ratio", r.final_ratio},
                           {"total_seconds", r.total()},
                           {"total_over_fixed", r.total() / fixed.total()},
                           {"freezes_seed0", r.freezes},
                           {"dp_accuracy", r.dp_accuracy},
                           {"dp_bytes_per_step", r.dp_bytes_per_step},
                           {"dp_phase_bytes_per_step", r.dp_phase_bytes}});
    }
    md << table.markdown();
    md << "\nTarget: a progressive row within 0.5 points of full fine-tuning's accuracy ("
       << fmt(mean(full.accuracy), 4) << "), with a total time no longer than fixed "
       << fmt(o_.fixed_ratio, 2) << "'s (" << fmt(fixed.total(), 1) << " s).\n";
    bool any = false;
    for (const Row& r : rows) {
      if (r.kind != "rule") continue;
      const double gap = (mean(full.accuracy) - mean(r.accuracy)) * 100;
      const bool acc_ok = gap <= 0.5;
      const bool time_ok = r.total() <= fixed.total();
      any = any || (acc_ok && time_ok);
      md << "- " << r.rule << ": " << fmt(gap, 2) << " points below full fine-tuning ("
         << (acc_ok ? "within" : "outside") << " 0.5), total " << fmt(r.total() / fixed.total(), 2)
         << "x fixed's (" << (time_ok ? "no longer" : "longer") << "): target "
         << (acc_ok && time_ok ? "met" : "not met") << "\n";
      j["target"][r.rule] = {{"points_below_full", gap}, {"within_accuracy", acc_ok},
                             {"no_longer_than_fixed", time_ok}};
    }
    md << (any ? "" : "No progressive rule meets the target in this run.\n");
    j["target_met"] = any;
    write_json(work_ + "/progressive.json", j);
    write_text(work_ + "/progressive.md", md.str());
    std::cout << md.str() << "\nwrote " << work_ << "/progressive.json, progressive.md" << std::endl;
  }

  ProgressiveBenchOptions o_;
  CommonOptions& c_;  // o_.common
  std::string work_;
};

}  // namespace

CLI::Option* add_progressive_flags(CLI::App* app, ProgressiveBenchOptions* o) {
  CLI::Option* progressive = app->add_flag(
      "--progressive", o->selected,
      "instead of the ratio table, progressive recycling (recycle-train --freeze) beside full "
      "fine-tuning and a fixed recycle point: accuracy over --seeds seeds, total wall time with "
      "builds, and bytes sent per step per rank under --nproc 2 (docs/progressive.md). Writes "
      "progressive.json, progressive.md; --quick: 2,000 samples, 4 epochs, 3 seeds");
  app->add_option("--freeze-rules", o->rules, "with --progressive: the --freeze rules to run")
      ->delimiter(',')
      ->needs(progressive)
      ->capture_default_str();
  app->add_option("--fixed-ratio", o->fixed_ratio, "with --progressive: the fixed row's recycle ratio")
      ->check(CLI::Range(0.125, 1.0))
      ->needs(progressive)
      ->capture_default_str();
  app->add_option("--composer-python", o->composer_python,
                  "with --progressive: instead of its table, each linear rule beside MosaicML "
                  "Composer's LayerFreezing (the same schedule) run by this interpreter "
                  "(bench/peers/composer_venv.sh makes one); writes composer.json, composer.md")
      ->check(CLI::ExistingFile)
      ->needs(progressive);
  app->add_option("--composer-script", o->composer_script, "with --composer-python: the peer")
      ->check(CLI::ExistingFile)
      ->needs(progressive)
      ->capture_default_str();
  return progressive;
}

void apply_progressive_defaults(const CLI::App& app, ProgressiveBenchOptions* o) {
  if (!o->common.quick) return;
  // Freezing needs epochs to freeze between; the target is over 3 seeds.
  if (!given(app, "--epochs")) o->common.epochs = 4;
  if (!given(app, "--seeds")) o->common.seeds = 3;
}

std::string check_progressive_options(const ProgressiveBenchOptions& o) {
  if (std::abs(o.fixed_ratio * 8 - std::round(o.fixed_ratio * 8)) > 1e-6) {
    return "--fixed-ratio: " + csv_number(o.fixed_ratio) + " is not a multiple of 1/8 (ResNet-18 has 8 blocks)";
  }
  return "";
}

void run_progressive_bench(ProgressiveBenchOptions options) { ProgressiveBench(std::move(options)).run(); }

}  // namespace recycle::bench
