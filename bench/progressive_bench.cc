#include "bench/progressive_bench.h"

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

class ProgressiveBench {
 public:
  explicit ProgressiveBench(ProgressiveBenchOptions o) : o_(std::move(o)) {
    work_ = fs::absolute(o_.out).string();
  }

  void run() {
    std::vector<Row> rows;
    rows.push_back(full());
    rows.push_back(fixed());
    for (const std::string& rule : o_.rules) rows.push_back(progressive(rule));
    report(rows);
  }

 private:
  std::string tool(const std::string& name) const { return o_.tools_dir + "/" + name; }

  std::vector<std::string> raw_data() const {
    return {"--data", "fashion-mnist", "--classes", "5-9", "--limit", std::to_string(o_.samples),
            "--weights", o_.weights, "--recycle", "0"};
  }
  std::vector<std::string> common(int64_t seed) const {
    return {"--epochs", std::to_string(o_.epochs), "--batch", std::to_string(o_.batch),
            "--seed", std::to_string(seed), "--threads", std::to_string(o_.threads), "--json"};
  }
  std::vector<std::string> dp_flags() const {
    return {"--nproc", std::to_string(o_.nproc), "--timeout", std::to_string(o_.timeout_seconds)};
  }

  // Runs one configuration's command for every seed, then with --nproc for seed 0.
  // `argv_for(seed, run)` gives the command (run names a fresh directory where one is needed).
  template <typename Argv>
  void run_seeds(Row* r, const std::string& label, Argv argv_for) {
    for (int64_t seed = 0; seed < o_.seeds; ++seed) {
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
      std::vector<std::string> argv = {tool("recycle-train")};
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
      std::vector<std::string> argv = {tool("recycle-build"), "--data", "fashion-mnist",
                                       "--classes", "5-9", "--split", split, "--weights",
                                       o_.weights, "--recycle", fmt(o_.fixed_ratio, 3), "--codec",
                                       o_.codec, "--cache", cache, "--threads",
                                       std::to_string(o_.threads), "--json"};
      if (split == "train") append(&argv, {"--rebuild", "--limit", std::to_string(o_.samples)});
      r.build_seconds += run_child(argv, work_).seconds;
    }
    run_seeds(&r, label, [&](int64_t seed, const std::string&) {
      std::vector<std::string> argv = {tool("recycle-train"), "--cache", cache};
      append(&argv, common(seed));
      return argv;
    });
    return r;
  }

  Row progressive(const std::string& rule) {
    Row r;
    r.kind = "rule";
    r.rule = rule;
    run_seeds(&r, r.label(o_.fixed_ratio), [&](int64_t seed, const std::string& run) {
      // A fresh levels directory: every level of the run is made inside it (timed).
      const std::string levels = work_ + "/progressive-levels/" + rule + "-" + run;
      fs::remove_all(levels);
      std::vector<std::string> argv = {tool("recycle-train")};
      append(&argv, raw_data());
      append(&argv, {"--freeze", rule, "--levels", levels, "--level-codec", o_.codec});
      append(&argv, common(seed));
      return argv;
    });
    return r;
  }

  void report(const std::vector<Row>& rows) {
    const Row& full = rows[0];
    const Row& fixed = rows[1];
    std::ostringstream md;
    md << "Progressive recycling on Fashion-MNIST classes 5-9: " << o_.samples << " samples, "
       << o_.epochs << " epochs, batch " << o_.batch << ", " << o_.seeds << " seed"
       << (o_.seeds == 1 ? "" : "s") << "; bytes per step per rank with --nproc " << o_.nproc
       << " (fp32 allreduce, seed 0).\n\n"
       << "| configuration | test acc (mean ± sd) | total s (builds included) | total / fixed | "
          "levels or build s | frozen at end | freezes (seed 0: epoch: blocks) | bytes/step --nproc "
       << o_.nproc << " | per phase | acc --nproc " << o_.nproc << " |\n"
       << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    json j;
    j["options"] = {{"samples", o_.samples}, {"epochs", o_.epochs},   {"seeds", o_.seeds},
                    {"batch", o_.batch},     {"threads", o_.threads}, {"codec", o_.codec},
                    {"nproc", o_.nproc},     {"fixed_ratio", o_.fixed_ratio},
                    {"weights", o_.weights}, {"rules", o_.rules}};
    for (const Row& r : rows) {
      std::string phases;
      for (double b : r.dp_phase_bytes) phases += (phases.empty() ? "" : " → ") + bytes(b);
      md << "| " << r.label(o_.fixed_ratio) << " | " << fmt(mean(r.accuracy), 4) << " ± "
         << fmt(stddev(r.accuracy), 4) << " | " << fmt(r.total(), 1) << " | "
         << fmt(r.total() / fixed.total(), 2) << " | "
         << (r.kind == "rule" ? fmt(median(r.level_seconds), 1)
                              : r.kind == "fixed" ? fmt(r.build_seconds, 1) : "-")
         << " | "
         << (r.kind == "rule" ? fmt(mean(r.final_ratio), 3)
                              : r.kind == "fixed" ? fmt(o_.fixed_ratio, 3) : "0")
         << " | " << (r.kind == "rule" ? r.freezes : "-") << " | " << bytes(r.dp_bytes_per_step)
         << " | " << (r.dp_phase_bytes.size() > 1 ? phases : "-") << " | "
         << (r.dp_accuracy >= 0 ? fmt(r.dp_accuracy, 4) : "-") << " |\n";
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
    std::ofstream(work_ + "/progressive.json") << j.dump(2) << "\n";
    std::ofstream(work_ + "/progressive.md") << md.str();
    std::cout << md.str() << "\nwrote " << o_.out << "/progressive.json, progressive.md" << std::endl;
  }

  ProgressiveBenchOptions o_;
  std::string work_;
};

}  // namespace

void run_progressive_bench(const ProgressiveBenchOptions& options) {
  ProgressiveBench(options).run();
}

}  // namespace recycle::bench
