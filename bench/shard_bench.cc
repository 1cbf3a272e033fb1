#include "bench/shard_bench.h"

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
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

// One way of training at one world size, over every seed.
struct Row {
  int world = 1;
  bool sharded = false;
  double build_seconds = 0;          // the train split's build (rank 0's report: the slowest)
  std::vector<double> acc;           // per seed
  std::vector<double> epoch_median;  // per seed: the median of its epochs
  std::vector<int64_t> test_samples;
  std::string name() const {
    return (sharded ? std::to_string(world) + " shards, " : std::string("one cache, ")) +
           std::to_string(world) + " ranks";
  }
};

class ShardBench {
 public:
  explicit ShardBench(ShardBenchOptions o) : o_(std::move(o)), c_(o_.common) {
    work_ = c_.work_dir() + "/shards";
  }

  void run() {
    ensure_encoder(&c_);
    fs::remove_all(work_);
    fs::create_directories(work_);
    const std::string shared = work_ + "/shared";
    const double shared_build = build(shared, {});
    std::vector<Row> rows;
    for (int w : o_.worlds) {
      Row one;
      one.world = w;
      one.build_seconds = shared_build;
      Row shards;
      shards.world = w;
      shards.sharded = true;
      const std::string dir = work_ + "/w" + std::to_string(w) + "-{rank}";
      shards.build_seconds = build(dir, {"--nproc", std::to_string(w), "--sharded"});
      // The seeds in turns, so that a drift of the machine's speed falls on both alike.
      for (int64_t seed = 0; seed < c_.seeds; ++seed) {
        train(&one, shared, seed, {});
        train(&shards, dir, seed, {"--sharded"});
      }
      rows.push_back(std::move(one));
      rows.push_back(std::move(shards));
    }
    report(rows);
  }

 private:
  std::vector<std::string> data(const std::string& split) const {
    std::vector<std::string> a = {"--data", "fashion-mnist", "--classes", "5-9", "--split", split};
    if (split == "train") append(&a, {"--limit", std::to_string(c_.samples)});
    return a;
  }
  // Builds the train and test splits into `cache` (more: how); the train split's seconds.
  double build(const std::string& cache, const std::vector<std::string>& more) {
    note("build " + cache);
    double seconds = 0;
    for (const char* split : {"train", "test"}) {
      std::vector<std::string> b = {c_.tool("recycle-build"), "--weights", c_.weights,
                                    "--recycle", "0.5", "--codec", codec_name(c_.codec),
                                    "--cache", cache, "--threads", std::to_string(c_.threads),
                                    "--json"};
      append(&b, data(split));
      append(&b, more);
      const ChildRun r = run_child(b, work_);
      if (std::string(split) == "train") seconds = r.result.at("seconds").get<double>();
    }
    return seconds;
  }
  void train(Row* row, const std::string& cache, int64_t seed, const std::vector<std::string>& more) {
    note(row->name() + ": seed " + std::to_string(seed));
    std::vector<std::string> t = {c_.tool("recycle-train"), "--cache", cache, "--nproc",
                                  std::to_string(row->world), "--epochs", std::to_string(c_.epochs),
                                  "--batch", std::to_string(c_.batch), "--seed",
                                  std::to_string(seed), "--threads", std::to_string(c_.threads),
                                  "--json"};
    append(&t, more);
    const ChildRun r = run_child(t, work_);
    row->acc.push_back(r.result.at("test_acc").get<double>());
    row->epoch_median.push_back(median(r.result.at("epoch_seconds").get<std::vector<double>>()));
    row->test_samples.push_back(r.result.at("test_samples").get<int64_t>());
  }

  void report(const std::vector<Row>& rows) {
    std::ostringstream md;
    md << "Training from shards against one shared cache at the same world size: "
       << c_.samples << " training samples of classes 5-9 (test: all of classes 5-9), recycle "
       << "ratio 0.5, " << c_.epochs << " epochs, batch " << c_.batch << " per rank, codec "
       << codec_name(c_.codec) << ", " << c_.threads_or_cores() << " threads in all, "
       << c_.seeds << " seeds (accuracy mean ± sd; epoch seconds: the median over the seeds of "
       << "each run's median epoch). The shared cache is built once by one process; the shards "
       << "by recycle-build --nproc W --sharded.\n\n";
    Table table({"configuration", "build s", "epoch s", "test acc", "test samples",
                 "acc shards - one cache (points)", "epoch shards / one cache"});
    json j;
    j["options"] = c_.to_json();
    j["options"].update({{"batch", c_.batch},
                         {"threads", c_.threads_or_cores()},
                         {"codec", codec_name(c_.codec)},
                         {"worlds", o_.worlds}});
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const Row* one = r.sharded && i > 0 ? &rows[i - 1] : nullptr;
      const double diff = one ? 100 * (mean(r.acc) - mean(one->acc)) : 0;
      const double ratio = one ? median(r.epoch_median) / median(one->epoch_median) : 0;
      table.add_row({r.name(), fmt(r.build_seconds, 2), fmt(median(r.epoch_median), 3),
                     fmt(mean(r.acc), 4) + " ± " + fmt(stddev(r.acc), 4),
                     std::to_string(r.test_samples.empty() ? 0 : r.test_samples[0]),
                     one ? fmt(diff, 2) : "-", one ? fmt(ratio, 3) : "-"});
      json row = {{"configuration", r.name()},
                  {"world", r.world},
                  {"sharded", r.sharded},
                  {"build_seconds", r.build_seconds},
                  {"epoch_seconds_median", r.epoch_median},
                  {"test_acc", r.acc},
                  {"test_samples", r.test_samples}};
      if (one) row.update({{"acc_minus_one_cache_points", diff}, {"epoch_ratio", ratio}});
      j["rows"].push_back(row);
    }
    md << table.markdown();
    write_json(c_.work_dir() + "/shards.json", j);
    write_text(c_.work_dir() + "/shards.md", md.str());
    std::cout << md.str() << "\nwrote " << c_.work_dir() << "/shards.json, shards.md" << std::endl;
  }

  ShardBenchOptions o_;
  CommonOptions& c_;  // o_.common
  std::string work_;
};

}  // namespace

CLI::Option* add_shard_flags(CLI::App* app, ShardBenchOptions* o) {
  return app
      ->add_option_function<std::vector<int>>(
          "--shards",
          [o](const std::vector<int>& worlds) {
            o->selected = true;
            o->worlds = worlds;
          },
          "instead of the ratio table, training from W shards (--sharded) against one shared "
          "cache at W ranks, for each W given (e.g. 2,3; docs/scale.md). Writes shards.json, "
          "shards.md")
      ->delimiter(',')
      ->check(CLI::Range(2, 16));
}

void run_shard_bench(ShardBenchOptions options) { ShardBench(std::move(options)).run(); }

}  // namespace recycle::bench
