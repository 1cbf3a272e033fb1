#include "bench/ratio_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/stats.h"
#include "bench/bench_util.h"
#include "bench/report_table.h"
#include "bench/transfer_task.h"

namespace recycle::bench {

namespace fs = std::filesystem;
using nlohmann::json;

CLI::Option* add_ratio_flags(CLI::App* app, RatioBenchOptions* o) {
  const CLI::Validator on_a_block(
      [](std::string& value) {
        double r = 0;
        if (!CLI::detail::lexical_cast(value, r) || !(r > 0 && r <= 1)) {
          return "ratio " + value + " is not in (0, 1]";
        }
        return std::string();
      },
      "RATIO");
  app->add_option("--ratios", o->ratios, "recycle ratios to cache")->check(on_a_block);
  return app->add_flag("--peer", o->peer,
                       "also run the eager PyTorch peer and report engine/peer ratios");
}

std::string check_ratios(const std::vector<double>& ratios, Task task) {
  if (task != Task::image) return "";
  for (double r : ratios) {
    if (std::abs(r * 8 - std::round(r * 8)) > 1e-6) {
      return "--ratios: " + csv_number(r) + " is not a multiple of 1/8 (ResNet-18 has 8 blocks)";
    }
  }
  return "";
}

namespace {

// One configuration's measurements over all seeds.
struct Config {
  std::string name;  // full, recycle, frozen
  double ratio = 0;
  std::vector<double> accuracy;
  std::vector<double> epoch_seconds;  // every epoch of every seed
  std::vector<double> train_seconds;  // wall time of each training run
  double build_seconds = 0;           // cache build, train + test split (wall)
  double bytes_per_sample = 0;        // encoded record bytes per cached sample
  double peak_mb = 0;
  double samples_per_s = 0;        // training samples over the median epoch
  double build_samples_per_s = 0;  // training split build, whole command

  double epoch() const { return median(epoch_seconds); }
  double total() const { return build_seconds + median(train_seconds); }
};

std::string label(const Config& c) {
  if (c.name == "full") return "full fine-tuning";
  if (c.name == "frozen") return "frozen, no cache";
  if (c.ratio == 1.0) return "head only (cached)";
  return "recycle " + fmt(c.ratio, 2);
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

class RatioBench {
 public:
  explicit RatioBench(RatioBenchOptions o) : o_(std::move(o)), c_(o_.common) {
    work_ = c_.work_dir();
  }
  // c_ refers to o_.common: not copied.
  RatioBench(const RatioBench&) = delete;
  RatioBench& operator=(const RatioBench&) = delete;

  void run() {
    const auto start = std::chrono::steady_clock::now();
    pretrain_acc_ = ensure_encoder(&c_);
    std::vector<Config> configs;
    configs.push_back(train_raw("full", 0.0));
    for (double r : o_.ratios) configs.push_back(recycle(r));
    configs.push_back(train_raw("frozen", 0.5));
    json peer;
    if (o_.peer) peer = run_peer(configs);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report(configs, peer, seconds);
  }

 private:
  std::vector<std::string> common_train_flags(int64_t seed) const {
    std::vector<std::string> flags = {
        "--epochs", std::to_string(c_.epochs), "--batch",   std::to_string(c_.batch),
        "--seed",   std::to_string(seed),      "--threads", std::to_string(c_.threads),
        "--json"};
    append(&flags, optimizer_flags(c_, false));
    return flags;
  }

  void add_train_run(Config* c, const ChildRun& r) {
    c->accuracy.push_back(r.result.at("test_acc").get<double>());
    for (double e : r.result.at("epoch_seconds")) c->epoch_seconds.push_back(e);
    c->train_seconds.push_back(r.seconds);
    c->peak_mb = std::max(c->peak_mb, r.peak_mb);
    c->samples_per_s = r.result.at("train_samples").get<double>() / c->epoch();
  }

  Config train_raw(const std::string& name, double ratio) {
    Config c;
    c.name = name;
    c.ratio = ratio;
    for (int64_t seed = 0; seed < c_.seeds; ++seed) {
      note(label(c) + ", seed " + std::to_string(seed));
      std::vector<std::string> argv = {c_.tool("recycle-train")};
      append(&argv, finetune_data(c_));
      append(&argv, {"--limit", std::to_string(c_.samples), "--weights", c_.weights, "--recycle",
                     fmt(ratio, 2)});
      if (name == "frozen") argv.push_back("--no-cache");
      append(&argv, common_train_flags(seed));
      add_train_run(&c, run_child(argv, work_));
    }
    return c;
  }

  Config recycle(double ratio) {
    Config c;
    c.name = "recycle";
    c.ratio = ratio;
    const std::string cache = work_ + "/cache-r" + fmt(ratio * 100, 0);
    note(label(c) + ": building the cache");
    for (const std::string split : {"train", "test"}) {
      std::vector<std::string> argv = {c_.tool("recycle-build")};
      append(&argv, finetune_data(c_));
      append(&argv, {"--split", split, "--weights", c_.weights, "--recycle", fmt(ratio, 2),
                     "--codec", codec_name(c_.codec), "--cache", cache, "--rebuild", "--threads",
                     std::to_string(c_.threads), "--json"});
      if (split == "train") argv.insert(argv.end(), {"--limit", std::to_string(c_.samples)});
      if (split == "test") argv.erase(std::find(argv.begin(), argv.end(), "--rebuild"));
      const ChildRun r = run_child(argv, work_);
      c.build_seconds += r.seconds;
      c.peak_mb = std::max(c.peak_mb, r.peak_mb);
      if (split == "train") {
        c.bytes_per_sample = r.result.at("bytes").get<double>() /
                             std::max<int64_t>(1, r.result.at("computed").get<int64_t>());
        c.build_samples_per_s = r.result.at("samples").get<double>() / r.seconds;
      }
    }
    for (int64_t seed = 0; seed < c_.seeds; ++seed) {
      note(label(c) + ", seed " + std::to_string(seed));
      std::vector<std::string> argv = {c_.tool("recycle-train"), "--cache", cache};
      append(&argv, common_train_flags(seed));
      add_train_run(&c, run_child(argv, work_));
    }
    return c;
  }

  json run_peer(const std::vector<Config>& configs) {
    note("running the eager PyTorch peer");
    const ChildRun r =
        run_child({c_.python, c_.peer_script, "--classes", "5-9", "--limit",
                   std::to_string(c_.samples), "--epochs", std::to_string(c_.epochs), "--batch",
                   std::to_string(c_.batch), "--threads", std::to_string(c_.threads_or_cores())},
                  work_);
    json peer = r.result;
    const Config* full = nullptr;
    const Config* half = nullptr;
    for (const Config& c : configs) {
      if (c.name == "full") full = &c;
      if (c.name == "recycle" && c.ratio == 0.5) half = &c;
    }
    json ratios;
    ratios["full_epoch"] = full->samples_per_s / peer.at("full_samples_per_s").get<double>();
    if (half != nullptr) {
      ratios["head_epoch_r50"] = half->samples_per_s / peer.at("head_samples_per_s").get<double>();
      ratios["build_r50"] =
          half->build_samples_per_s / peer.at("prefix_samples_per_s").get<double>();
    }
    peer["engine_over_peer"] = ratios;
    return peer;
  }

  void report(const std::vector<Config>& configs, const json& peer, double seconds) {
    const Config& full = configs.front();
    const std::string& out = c_.out;
    json j;
    j["options"] = c_.to_json();
    j["options"].update({{"task", task_name(c_.task)},
                         {"quick", c_.quick},
                         {"batch", c_.batch},
                         {"threads", c_.threads},
                         {"codec", codec_name(c_.codec)}});
    j["machine"] = {{"cores", cores()}, {"cpu", cpu_name()}};
    if (pretrain_acc_ > 0) j["pretrain_test_acc"] = pretrain_acc_;
    j["seconds"] = seconds;
    Table csv({"config", "ratio", "acc_mean", "acc_std", "build_s", "epoch_s", "total_s",
               "epoch_speedup", "total_speedup", "bytes_per_sample", "peak_mb"});
    Table md({"configuration", "r",
              "test acc (mean ± sd over " + std::to_string(c_.seeds) + " seed" +
                  (c_.seeds == 1 ? "" : "s") + ")",
              "cache build s", "epoch s (median)", "total s", "epoch speedup", "total speedup",
              "cache bytes/sample", "peak MB"});
    for (const Config& c : configs) {
      const double epoch_speedup = full.epoch() / c.epoch();
      const double total_speedup = full.total() / c.total();
      j["configs"].push_back({{"config", c.name},
                              {"label", label(c)},
                              {"ratio", c.ratio},
                              {"accuracy", c.accuracy},
                              {"acc_mean", mean(c.accuracy)},
                              {"acc_std", stddev(c.accuracy)},
                              {"build_seconds", c.build_seconds},
                              {"epoch_seconds", c.epoch_seconds},
                              {"epoch_seconds_median", c.epoch()},
                              {"total_seconds", c.total()},
                              {"epoch_speedup", epoch_speedup},
                              {"total_speedup", total_speedup},
                              {"samples_per_s", c.samples_per_s},
                              {"bytes_per_sample", c.bytes_per_sample},
                              {"peak_mb", c.peak_mb}});
      csv.add_row({c.name, csv_number(c.ratio), csv_number(mean(c.accuracy)),
                   csv_number(stddev(c.accuracy)), csv_number(c.build_seconds),
                   csv_number(c.epoch()), csv_number(c.total()), csv_number(epoch_speedup),
                   csv_number(total_speedup), csv_number(c.bytes_per_sample),
                   csv_number(c.peak_mb)});
      const bool cached = c.name == "recycle";
      md.add_row({label(c), fmt(c.ratio, 2),
                  fmt(mean(c.accuracy), 4) + " ± " + fmt(stddev(c.accuracy), 4),
                  cached ? fmt(c.build_seconds, 1) : "-", fmt(c.epoch(), 2), fmt(c.total(), 1),
                  fmt(epoch_speedup, 2) + "x", fmt(total_speedup, 2) + "x",
                  cached ? fmt(c.bytes_per_sample, 0) : "-", fmt(c.peak_mb, 0)});
    }
    write_text(out + "/bench.csv", csv.csv());
    std::string text = md.markdown();
    if (!peer.is_null()) {
      j["peer"] = peer;
      const json& r = peer["engine_over_peer"];
      text +=
          "\nEngine throughput / eager PyTorch peer throughput (same model, data, batch, threads): "
          "full fine-tuning epoch " +
          fmt(r.value("full_epoch", 0.0), 2) + "x, head epoch at 0.5 " +
          fmt(r.value("head_epoch_r50", 0.0), 2) +
          "x, cache build vs the peer's no-grad prefix pass " + fmt(r.value("build_r50", 0.0), 2) +
          "x\n";
    }
    write_json(out + "/bench.json", j);
    plot();
    std::cout << text;
    std::cout << "\nwrote " << out << "/bench.json, bench.csv"
              << (fs::exists(out + "/bench.png") ? ", bench.png"
                                                 : " (no bench.png: gnuplot missing)")
              << " in " << fmt(seconds, 0) << " s" << std::endl;
  }

  // Accuracy and epoch speedup against the ratio, from bench.csv, with gnuplot.
  void plot() const {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;
    const std::string& out = c_.out;
    const std::string script = out + "/bench.gp";
    std::ofstream gp(script);
    gp << "set terminal pngcairo size 900,560 noenhanced\n"
       << "set output '" << out << "/bench.png'\n"
       << "set datafile separator ','\n"
       << "set title '"
       << (c_.text() ? "SpamAssassin 2003, ham against spam" : "Fashion-MNIST classes 5-9") << ": "
       << c_.samples << " samples, " << c_.epochs << " epochs, " << c_.seeds
       << (c_.seeds == 1 ? " seed" : " seeds") << "'\n"
       << "set xlabel 'recycle ratio (fraction of encoder " << (c_.text() ? "layers" : "blocks")
       << " frozen and cached)'\n"
       << "set ylabel 'test accuracy'\nset y2label 'epoch speedup over full fine-tuning (x)'\n"
       << "set ytics nomirror\nset y2tics\nset key center left\nset grid\n"
       << "set xrange [-0.05:1.05]\nset logscale y2\nset y2range [1:*]\n"
       << "plot '" << out << "/bench.csv' every ::1 using (strcol(1) eq 'frozen' ? NaN : $2):3:4 "
       << "with yerrorlines lw 2 title 'accuracy (cache)', \\\n"
       << "  '' every ::1 using (strcol(1) eq 'frozen' ? NaN : $2):8 axes x1y2 with linespoints lw "
          "2 "
       << "title 'epoch speedup (cache)', \\\n"
       << "  '' every ::1 using (strcol(1) eq 'frozen' ? $2 : NaN):3 with points pt 7 ps 1.5 "
       << "title 'accuracy (frozen, no cache)', \\\n"
       << "  '' every ::1 using (strcol(1) eq 'frozen' ? $2 : NaN):8 axes x1y2 with points pt 5 ps "
          "1.5 "
       << "title 'epoch speedup (frozen, no cache)'\n";
    gp.close();
    if (std::system(("gnuplot '" + script + "' 2>'" + out + "/gnuplot.log'").c_str()) != 0) {
      note("gnuplot failed; see " + out + "/gnuplot.log");
    }
  }

  RatioBenchOptions o_;
  CommonOptions& c_;  // o_.common
  std::string work_;
  double pretrain_acc_ = 0;
};

}  // namespace

void run_ratio_bench(RatioBenchOptions options) { RatioBench(std::move(options)).run(); }

}  // namespace recycle::bench
