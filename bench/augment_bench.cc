#include "bench/augment_bench.h"

#include <filesystem>
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
#include "engine/data/augment.h"

namespace recycle::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Row {
  std::string name;
  int64_t views = 0;         // cache rows: views per sample (0: none)
  double build_seconds = 0;  // cache rows: the train split's build
  int64_t records = 0;       // cache rows: records of the train split
  std::vector<double> acc, epoch_median, total;  // per seed
};

class AugmentBench {
 public:
  explicit AugmentBench(AugmentBenchOptions o) : o_(std::move(o)), c_(o_.common) {
    work_ = c_.work_dir() + "/augment";
  }

  void run() {
    ensure_encoder(&c_);
    fs::remove_all(work_);
    fs::create_directories(work_);
    std::vector<Row> rows;
    rows.push_back(cached_row(0));
    for (int64_t k : o_.views) rows.push_back(cached_row(k));
    rows.push_back(raw_row("online augmentation (prefix every epoch)", true));
    rows.push_back(raw_row("frozen prefix every epoch, no augmentation", false));
    report(rows);
  }

 private:
  std::vector<std::string> data(const std::string& split) const {
    std::vector<std::string> a = {"--data", "fashion-mnist", "--classes", "5-9", "--split", split};
    if (split == "train") append(&a, {"--limit", std::to_string(o_.samples)});
    return a;
  }
  std::vector<std::string> train_flags(int64_t seed) const {
    return {"--epochs", std::to_string(c_.epochs), "--batch", std::to_string(c_.batch),
            "--seed", std::to_string(seed), "--threads", std::to_string(c_.threads), "--json"};
  }
  // A cache of the plain test split and the train split with k views (0: none).
  Row cached_row(int64_t k) {
    Row row;
    row.views = k;
    row.name = k == 0 ? "cache, no augmentation" : "cache, " + std::to_string(k) + " views";
    note(row.name + ": build");
    const std::string cache = work_ + "/cache-" + std::to_string(k);
    std::vector<std::string> build = {c_.tool("recycle-build"), "--weights", c_.weights,
                                      "--recycle", fmt(o_.ratio, 3), "--codec",
                                      codec_name(c_.codec), "--cache", cache, "--threads",
                                      std::to_string(c_.threads), "--json"};
    std::vector<std::string> train_split = build;
    append(&train_split, data("train"));
    if (k > 0) append(&train_split, {"--augment", o_.spec, "--views", std::to_string(k)});
    const ChildRun b = run_child(train_split, work_);
    row.build_seconds = b.result.at("seconds").get<double>();
    row.records = b.result.at("records").get<int64_t>();
    std::vector<std::string> test_split = build;
    append(&test_split, data("test"));
    run_child(test_split, work_);
    for (int64_t seed = 0; seed < c_.seeds; ++seed) {
      note(row.name + ": seed " + std::to_string(seed));
      std::vector<std::string> t = {c_.tool("recycle-train"), "--cache", cache};
      append(&t, train_flags(seed));
      add_result(&row, run_child(t, work_));
    }
    return row;
  }
  Row raw_row(const std::string& name, bool augment) {
    Row row;
    row.name = name;
    for (int64_t seed = 0; seed < c_.seeds; ++seed) {
      note(name + ": seed " + std::to_string(seed));
      std::vector<std::string> t = {c_.tool("recycle-train"), "--weights", c_.weights,
                                    "--recycle", fmt(o_.ratio, 3), "--no-cache"};
      append(&t, data("train"));
      if (augment) append(&t, {"--augment", o_.spec});
      append(&t, train_flags(seed));
      add_result(&row, run_child(t, work_));
    }
    return row;
  }
  static void add_result(Row* row, const ChildRun& r) {
    row->acc.push_back(r.result.at("test_acc").get<double>());
    row->epoch_median.push_back(median(r.result.at("epoch_seconds").get<std::vector<double>>()));
    row->total.push_back(r.result.at("seconds").get<double>());
  }

  void report(const std::vector<Row>& rows) {
    std::ostringstream md;
    md << "Augmented views on a small-data task: " << o_.samples
       << " training samples of classes 5-9 (test: all of classes 5-9), recycle ratio "
       << fmt(o_.ratio, 2) << ", augmentation '" << o_.spec << "', " << c_.epochs
       << " epochs, batch " << c_.batch << ", codec " << codec_name(c_.codec) << ", "
       << c_.threads_or_cores() << " threads, " << c_.seeds
       << " seeds (accuracy mean ± sd; times are medians over the seeds). \"train s\" is the "
          "whole recycle-train run (loading, training, evaluation).\n\n";
    Table table({"configuration", "records", "build s", "epoch s", "train s", "build + train s",
                 "test acc"});
    json j;
    j["options"] = c_.to_json();
    j["options"].update({{"augment", o_.spec},
                         {"views", o_.views},
                         {"augment_samples", o_.samples},
                         {"ratio", o_.ratio},
                         {"batch", c_.batch},
                         {"threads", c_.threads_or_cores()},
                         {"codec", codec_name(c_.codec)}});
    for (const Row& r : rows) {
      const bool cached = r.name.rfind("cache", 0) == 0;
      table.add_row({r.name, cached ? std::to_string(r.records) : "-",
                     cached ? fmt(r.build_seconds, 2) : "-", fmt(median(r.epoch_median), 3),
                     fmt(median(r.total), 2), fmt(r.build_seconds + median(r.total), 2),
                     fmt(mean(r.acc), 4) + " ± " + fmt(stddev(r.acc), 4)});
      j["rows"].push_back({{"configuration", r.name},
                           {"views", r.views},
                           {"records", r.records},
                           {"build_seconds", r.build_seconds},
                           {"epoch_seconds_median", r.epoch_median},
                           {"train_seconds", r.total},
                           {"test_acc", r.acc}});
    }
    md << table.markdown();
    write_json(c_.work_dir() + "/augment.json", j);
    write_text(c_.work_dir() + "/augment.md", md.str());
    std::cout << md.str() << "\nwrote " << c_.work_dir() << "/augment.json, augment.md"
              << std::endl;
  }

  AugmentBenchOptions o_;
  CommonOptions& c_;  // o_.common
  std::string work_;
};

}  // namespace

CLI::Option* add_augment_flags(CLI::App* app, AugmentBenchOptions* o) {
  CLI::Option* augment = app->add_option_function<std::string>(
      "--augment",
      [o](const std::string& spec) {
        o->selected = true;
        o->spec = spec;
      },
      "instead of the ratio table, caches of augmented views on a small-data task against no "
      "augmentation and online augmentation through the prefix (docs/augmentation.md); the "
      "value is the augmentation, e.g. hflip,crop=2. Writes augment.json, augment.md; --quick: "
      "300 samples, 1 seed, 4 views");
  app->add_option("--augment-views", o->views, "with --augment: the view counts, e.g. 4,8")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{256}))
      ->needs(augment)
      ->capture_default_str();
  app->add_option("--augment-samples", o->samples, "with --augment: training samples")
      ->check(CLI::Range(int64_t{10}, int64_t{30000}))
      ->needs(augment)
      ->capture_default_str();
  app->add_option("--augment-ratio", o->ratio, "with --augment: the recycle ratio")
      ->check(CLI::Range(0.125, 0.875))
      ->needs(augment)
      ->capture_default_str();
  return augment;
}

void check_augment_spec(const std::string& spec) {
  if (spec.empty()) throw std::invalid_argument("--augment needs a spec, e.g. hflip,crop=2");
  Augment::parse(spec);
}

void apply_augment_defaults(const CLI::App& app, AugmentBenchOptions* o) {
  if (!given(app, "--epochs")) o->common.epochs = 8;
  if (!o->common.quick) return;
  if (!given(app, "--augment-samples")) o->samples = 300;
  if (!given(app, "--augment-views")) o->views = {4};
  if (!given(app, "--seeds")) o->common.seeds = 1;
}

void run_augment_bench(AugmentBenchOptions options) { AugmentBench(std::move(options)).run(); }

}  // namespace recycle::bench
