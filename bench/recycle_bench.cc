// recycle-bench: recycle ratio against accuracy and speed on a transfer task: the image task
// (Fashion-MNIST, ResNet-18: pretrained on classes 0-4, fine-tuned on 5-9) or, with --task
// text, the text task (SpamAssassin mails, the transformer encoder: pretrained on the 2002
// groups, fine-tuned on ham against spam of 2003; docs/text-task.md).
//
// Runs the real tools as child processes, so it measures exactly what users run: full
// fine-tuning (r = 0), recycling at each ratio (cache build + head training from the cache),
// and freezing without recycling at 0.5 (prefix recomputed every step), with the same
// pretrained encoder, data, batch size and thread count, over several seeds. Each child's
// peak resident memory comes from wait4(). Writes a Markdown table to stdout and bench.json,
// bench.csv and bench.png (gnuplot) to --out. With --peer it also runs the eager PyTorch
// peer (bench/peers/eager_peer.py) and reports the engine's throughput over the peer's.
// With --nproc N it runs the data-parallel comparison instead (bench/dist_bench.h): the
// engine's data-parallel head training beside the PyTorch DDP peer, optionally over a
// shaped link (--link). With --targets it runs the performance targets instead
// (bench/target_bench.h). With --progressive it runs progressive recycling's rules beside full
// fine-tuning and a fixed recycle point instead (bench/progressive_bench.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/stats.h"
#include "bench/bench_util.h"
#include "bench/dist_bench.h"
#include "bench/progressive_bench.h"
#include "bench/target_bench.h"

namespace fs = std::filesystem;
using nlohmann::json;
using recycle::median;
using recycle::bench::append;
using recycle::bench::ChildRun;
using recycle::bench::fmt;
using recycle::bench::mean;
using recycle::bench::note;
using recycle::bench::run_child;
using recycle::bench::stddev;

namespace {

struct BenchOptions {
  std::string task = "image";                  // image | text
  std::string text_dir = "data/spam-assassin";  // --task text: pretrain/ and finetune/ TSVs
  bool quick = false;
  std::string weights;           // pretrained encoder; "" = pretrain one here
  int64_t pretrain_epochs = 3;
  int64_t pretrain_limit = 0;    // 0 = all 30,000 samples of classes 0-4
  int64_t samples = 5000;        // training samples of classes 5-9
  int64_t epochs = 4;
  int64_t seeds = 3;
  int64_t batch = 128;
  int threads = 0;
  std::string codec = "fp16";
  std::vector<double> ratios = {0.25, 0.5, 0.75, 1.0};
  std::string out = "bench-out";
  std::string tools_dir;         // where recycle-build and recycle-train are
  bool peer = false;
  std::string peer_script = std::string(RECYCLE_SOURCE_DIR) + "/bench/peers/eager_peer.py";
  std::string python = "/usr/bin/python3";
  // --nproc N: the data-parallel comparison (bench/dist_bench.h) instead of the ratio table.
  int nproc = 0;
  std::string link = "loopback";
  std::vector<std::string> compressions = {"none", "fp16", "topk"};
  int average_every = 4;
  int timeout = 60;
  std::string ddp_peer_script = std::string(RECYCLE_SOURCE_DIR) + "/bench/peers/ddp_peer.py";
  // --targets: the performance targets table (bench/target_bench.h) instead of the ratio table.
  bool targets = false;
  int64_t rounds = 5;
  int64_t budget_mb = 256;
  std::vector<int64_t> memory_samples = {10000, 30000, 60000};
  // --progressive: progressive recycling's table (bench/progressive_bench.h) instead.
  bool progressive = false;
  std::vector<std::string> freeze_rules = {"linear:0:0.75", "auto:0.1"};
  double fixed_ratio = 0.5;
};

// One configuration's measurements over all seeds.
struct Config {
  std::string name;          // full, recycle, frozen
  double ratio = 0;
  std::vector<double> accuracy;
  std::vector<double> epoch_seconds;  // every epoch of every seed
  std::vector<double> train_seconds;  // wall time of each training run
  double build_seconds = 0;           // cache build, train + test split (wall)
  double bytes_per_sample = 0;        // encoded record bytes per cached sample
  double peak_mb = 0;
  double samples_per_s = 0;           // training samples over the median epoch
  double build_samples_per_s = 0;     // training split build, whole command

  double epoch() const { return median(epoch_seconds); }
  double total() const { return build_seconds + median(train_seconds); }
};

std::string label(const Config& c) {
  if (c.name == "full") return "full fine-tuning";
  if (c.name == "frozen") return "frozen, no cache";
  if (c.ratio == 1.0) return "head only (cached)";
  return "recycle " + fmt(c.ratio, 2);
}

class Bench {
 public:
  explicit Bench(BenchOptions o) : o_(std::move(o)) {}

  int run() {
    fs::create_directories(o_.out);
    work_ = fs::absolute(o_.out).string();
    const auto start = std::chrono::steady_clock::now();
    if (o_.weights.empty()) pretrain();
    if (o_.nproc > 0) {
      run_dist_bench(dist_options());
      return 0;
    }
    if (o_.targets) {
      run_target_bench(target_options());
      return 0;
    }
    if (o_.progressive) {
      run_progressive_bench(progressive_options());
      return 0;
    }
    std::vector<Config> configs;
    configs.push_back(train_raw("full", 0.0));
    for (double r : o_.ratios) configs.push_back(recycle(r));
    configs.push_back(train_raw("frozen", 0.5));
    json peer;
    if (o_.peer) peer = run_peer(configs);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report(configs, peer, seconds);
    return 0;
  }

 private:
  recycle::bench::DistBenchOptions dist_options() const {
    recycle::bench::DistBenchOptions d;
    d.nproc = o_.nproc;
    d.link = o_.link;
    d.compressions = o_.compressions;
    d.average_every = o_.average_every;
    d.timeout_seconds = o_.timeout;
    d.samples = o_.samples;
    d.epochs = o_.epochs;
    d.seeds = o_.seeds;
    d.batch = o_.batch;
    d.threads = o_.threads;
    d.codec = o_.codec;
    d.weights = o_.weights;
    d.out = work_;
    d.tools_dir = o_.tools_dir;
    d.python = o_.python;
    d.peer_script = o_.ddp_peer_script;
    return d;
  }

  recycle::bench::TargetBenchOptions target_options() const {
    recycle::bench::TargetBenchOptions t;
    t.samples = o_.samples;
    t.epochs = o_.epochs;
    t.rounds = o_.rounds;
    t.seeds = o_.seeds;
    t.batch = o_.batch;
    t.threads = o_.threads > 0 ? o_.threads : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    t.budget_mb = o_.budget_mb;
    t.memory_samples = o_.memory_samples;
    t.weights = o_.weights;
    t.out = work_;
    t.tools_dir = o_.tools_dir;
    t.python = o_.python;
    t.peer_script = o_.peer_script;
    return t;
  }

  recycle::bench::ProgressiveBenchOptions progressive_options() const {
    recycle::bench::ProgressiveBenchOptions p;
    p.rules = o_.freeze_rules;
    p.fixed_ratio = o_.fixed_ratio;
    p.samples = o_.samples;
    p.epochs = o_.epochs;
    p.seeds = o_.seeds;
    p.batch = o_.batch;
    p.threads = o_.threads;
    p.codec = o_.codec;
    p.weights = o_.weights;
    p.out = work_;
    p.tools_dir = o_.tools_dir;
    return p;
  }

  std::string tool(const std::string& name) const { return o_.tools_dir + "/" + name; }

  bool text() const { return o_.task == "text"; }

  // The data (and, for text, the model) the encoder is pretrained on.
  std::vector<std::string> pretrain_data() const {
    if (text()) return {"--data", "tsv:" + o_.text_dir + "/pretrain", "--model", "transformer"};
    return {"--data", "fashion-mnist", "--classes", "0-4"};
  }
  // The data of the fine-tuning task; --split picks train or test.
  std::vector<std::string> finetune_data() const {
    if (text()) return {"--data", "tsv:" + o_.text_dir + "/finetune"};
    return {"--data", "fashion-mnist", "--classes", "5-9"};
  }
  std::string pretrain_task() const {
    return text() ? "the 2002 mails (easy-ham, hard-ham, spam)" : "classes 0-4";
  }

  // The optimiser: recycle-train's defaults (SGD, lr 0.05) for the image task. The transformer
  // stays near chance with SGD at that rate, so the text task uses AdamW: lr 0.001 (batch 128)
  // to pretrain, lr 0.003 for every fine-tuning row alike (batch 32 unless --batch says
  // otherwise; docs/text-task.md).
  std::vector<std::string> optimizer_flags(bool pretraining) const {
    if (!text()) return {};
    return {"--optimizer", "adamw", "--lr", pretraining ? "0.001" : "0.003"};
  }

  std::vector<std::string> common_train_flags(int64_t seed) const {
    std::vector<std::string> flags = {"--epochs", std::to_string(o_.epochs), "--batch",
                                      std::to_string(o_.batch), "--seed", std::to_string(seed),
                                      "--threads", std::to_string(o_.threads), "--json"};
    append(&flags, optimizer_flags(false));
    return flags;
  }

  void pretrain() {
    o_.weights = work_ + "/encoder.pt";
    if (fs::exists(o_.weights)) {
      note("reusing " + o_.weights);
      return;
    }
    note("pretraining the encoder on " + pretrain_task() + " (" +
         std::to_string(o_.pretrain_epochs) + " epochs)");
    std::vector<std::string> argv = {tool("recycle-train")};
    append(&argv, pretrain_data());
    append(&argv, {"--limit", std::to_string(o_.pretrain_limit), "--recycle", "0", "--epochs",
                   std::to_string(o_.pretrain_epochs), "--threads", std::to_string(o_.threads),
                   "--save-model", o_.weights, "--json"});
    append(&argv, optimizer_flags(true));
    const ChildRun r = run_child(argv, work_);
    pretrain_acc_ = r.result.value("test_acc", 0.0);
    note("encoder test accuracy on " + pretrain_task() + ": " + fmt(pretrain_acc_, 4));
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
    for (int64_t seed = 0; seed < o_.seeds; ++seed) {
      note(label(c) + ", seed " + std::to_string(seed));
      std::vector<std::string> argv = {tool("recycle-train")};
      append(&argv, finetune_data());
      append(&argv, {"--limit", std::to_string(o_.samples), "--weights", o_.weights, "--recycle",
                     fmt(ratio, 2)});
      if (name == "frozen") argv.push_back("--no-cache");
      for (const auto& f : common_train_flags(seed)) argv.push_back(f);
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
      std::vector<std::string> argv = {tool("recycle-build")};
      append(&argv, finetune_data());
      append(&argv, {"--split", split, "--weights", o_.weights, "--recycle", fmt(ratio, 2),
                     "--codec", o_.codec, "--cache", cache, "--rebuild", "--threads",
                     std::to_string(o_.threads), "--json"});
      if (split == "train") argv.insert(argv.end(), {"--limit", std::to_string(o_.samples)});
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
    for (int64_t seed = 0; seed < o_.seeds; ++seed) {
      note(label(c) + ", seed " + std::to_string(seed));
      std::vector<std::string> argv = {tool("recycle-train"), "--cache", cache};
      for (const auto& f : common_train_flags(seed)) argv.push_back(f);
      add_train_run(&c, run_child(argv, work_));
    }
    return c;
  }

  json run_peer(const std::vector<Config>& configs) {
    note("running the eager PyTorch peer");
    const int threads = o_.threads > 0 ? o_.threads : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    const ChildRun r = run_child({o_.python, o_.peer_script, "--classes", "5-9", "--limit",
                                  std::to_string(o_.samples), "--epochs", std::to_string(o_.epochs),
                                  "--batch", std::to_string(o_.batch), "--threads",
                                  std::to_string(threads)},
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
      ratios["build_r50"] = half->build_samples_per_s / peer.at("prefix_samples_per_s").get<double>();
    }
    peer["engine_over_peer"] = ratios;
    return peer;
  }

  void report(const std::vector<Config>& configs, const json& peer, double seconds) {
    const Config& full = configs.front();
    json j;
    j["options"] = {{"task", o_.task},         {"quick", o_.quick},
                    {"samples", o_.samples},   {"epochs", o_.epochs},
                    {"seeds", o_.seeds},       {"batch", o_.batch},     {"threads", o_.threads},
                    {"codec", o_.codec},       {"weights", o_.weights}};
    j["machine"] = {{"cores", sysconf(_SC_NPROCESSORS_ONLN)}, {"cpu", cpu_name()}};
    if (pretrain_acc_ > 0) j["pretrain_test_acc"] = pretrain_acc_;
    j["seconds"] = seconds;
    std::ofstream csv(o_.out + "/bench.csv");
    csv << "config,ratio,acc_mean,acc_std,build_s,epoch_s,total_s,epoch_speedup,total_speedup,"
           "bytes_per_sample,peak_mb\n";
    std::ostringstream md;
    md << "| configuration | r | test acc (mean ± sd over " << o_.seeds << " seed" << (o_.seeds == 1 ? "" : "s") << ") | cache build s | "
       << "epoch s (median) | total s | epoch speedup | total speedup | cache bytes/sample | peak MB |\n"
       << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
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
      csv << c.name << "," << c.ratio << "," << mean(c.accuracy) << "," << stddev(c.accuracy)
          << "," << c.build_seconds << "," << c.epoch() << "," << c.total() << ","
          << epoch_speedup << "," << total_speedup << "," << c.bytes_per_sample << ","
          << c.peak_mb << "\n";
      md << "| " << label(c) << " | " << fmt(c.ratio, 2) << " | " << fmt(mean(c.accuracy), 4)
         << " ± " << fmt(stddev(c.accuracy), 4) << " | "
         << (c.name == "recycle" ? fmt(c.build_seconds, 1) : "-") << " | " << fmt(c.epoch(), 2)
         << " | " << fmt(c.total(), 1) << " | " << fmt(epoch_speedup, 2) << "x | "
         << fmt(total_speedup, 2) << "x | "
         << (c.name == "recycle" ? fmt(c.bytes_per_sample, 0) : "-") << " | "
         << fmt(c.peak_mb, 0) << " |\n";
    }
    csv.close();
    if (!peer.is_null()) {
      j["peer"] = peer;
      const json& r = peer["engine_over_peer"];
      md << "\nEngine throughput / eager PyTorch peer throughput (same model, data, batch, "
            "threads): full fine-tuning epoch "
         << fmt(r.value("full_epoch", 0.0), 2) << "x, head epoch at 0.5 "
         << fmt(r.value("head_epoch_r50", 0.0), 2) << "x, cache build vs the peer's no-grad "
         << "prefix pass " << fmt(r.value("build_r50", 0.0), 2) << "x\n";
    }
    std::ofstream(o_.out + "/bench.json") << j.dump(2) << "\n";
    plot();
    std::cout << md.str();
    std::cout << "\nwrote " << o_.out << "/bench.json, bench.csv"
              << (fs::exists(o_.out + "/bench.png") ? ", bench.png" : " (no bench.png: gnuplot missing)")
              << " in " << fmt(seconds, 0) << " s" << std::endl;
  }

  static std::string cpu_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown";
  }

  // Accuracy and epoch speedup against the ratio, from bench.csv, with gnuplot.
  void plot() const {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;
    const std::string script = o_.out + "/bench.gp";
    std::ofstream gp(script);
    gp << "set terminal pngcairo size 900,560 noenhanced\n"
       << "set output '" << o_.out << "/bench.png'\n"
       << "set datafile separator ','\n"
       << "set title '"
       << (text() ? "SpamAssassin 2003, ham against spam" : "Fashion-MNIST classes 5-9") << ": "
       << o_.samples << " samples, " << o_.epochs
       << " epochs, " << o_.seeds << (o_.seeds == 1 ? " seed" : " seeds") << "'\n"
       << "set xlabel 'recycle ratio (fraction of encoder "
       << (text() ? "layers" : "blocks") << " frozen and cached)'\n"
       << "set ylabel 'test accuracy'\nset y2label 'epoch speedup over full fine-tuning (x)'\n"
       << "set ytics nomirror\nset y2tics\nset key center left\nset grid\n"
       << "set xrange [-0.05:1.05]\nset logscale y2\nset y2range [1:*]\n"
       << "plot '" << o_.out << "/bench.csv' every ::1 using (strcol(1) eq 'frozen' ? NaN : $2):3:4 "
       << "with yerrorlines lw 2 title 'accuracy (cache)', \\\n"
       << "  '' every ::1 using (strcol(1) eq 'frozen' ? NaN : $2):8 axes x1y2 with linespoints lw 2 "
       << "title 'epoch speedup (cache)', \\\n"
       << "  '' every ::1 using (strcol(1) eq 'frozen' ? $2 : NaN):3 with points pt 7 ps 1.5 "
       << "title 'accuracy (frozen, no cache)', \\\n"
       << "  '' every ::1 using (strcol(1) eq 'frozen' ? $2 : NaN):8 axes x1y2 with points pt 5 ps 1.5 "
       << "title 'epoch speedup (frozen, no cache)'\n";
    gp.close();
    if (std::system(("gnuplot '" + script + "' 2>'" + o_.out + "/gnuplot.log'").c_str()) != 0) {
      note("gnuplot failed; see " + o_.out + "/gnuplot.log");
    }
  }

  BenchOptions o_;
  std::string work_;
  double pretrain_acc_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app("Measures recycle ratio against accuracy and speed on a transfer task, running "
               "the real tools side by side: the Fashion-MNIST task (a ResNet-18 pretrained on "
               "classes 0-4, fine-tuned on 5-9) or, with --task text, the SpamAssassin task (the "
               "transformer encoder pretrained on the 2002 mails, fine-tuned on ham against spam "
               "of 2003; docs/text-task.md).",
               "recycle-bench");
  app.add_option("--task", o.task,
                 "image (Fashion-MNIST) or text (SpamAssassin mails from --text-dir; only the "
                 "ratio table: no --peer, --nproc or --targets)")
      ->check(CLI::IsMember({"image", "text"}))
      ->capture_default_str();
  app.add_option("--text-dir", o.text_dir,
                 "with --task text: the folder scripts/fetch_spam_corpus.sh wrote (pretrain/ and "
                 "finetune/)")
      ->capture_default_str();
  app.add_flag("--quick", o.quick, "fewer samples and epochs, one seed (image: under 10 "
                                  "minutes; 2,000 samples, 2 epochs, or 3 with --nproc; text: "
                                  "1,000 samples, 4 epochs, the encoder still pretrained 3 "
                                  "epochs; README has the time)");
  app.add_option("--weights", o.weights, "pretrained encoder (default: pretrain one in --out)")
      ->check(CLI::ExistingFile);
  // Every flag is checked here, so that bad usage exits 2 with this tool's own message
  // rather than failing later in a child.
  app.add_option("--pretrain-epochs", o.pretrain_epochs)
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  app.add_option("--pretrain-limit", o.pretrain_limit, "0 = all")
      ->check(CLI::Range(int64_t{0}, int64_t{30000}))
      ->capture_default_str();
  app.add_option("--samples", o.samples, "training samples of the fine-tuning task")
      ->check(CLI::Range(int64_t{1}, int64_t{30000}))
      ->capture_default_str();
  app.add_option("--epochs", o.epochs)->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  app.add_option("--seeds", o.seeds)->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "samples per training step (text: 32 unless given)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "0 = every core")->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--codec", o.codec)->check(CLI::IsMember({"fp32", "fp16", "bf16", "int8"}))->capture_default_str();
  const CLI::Validator on_a_block(
      [](std::string& value) {
        double r = 0;
        if (!CLI::detail::lexical_cast(value, r) || !(r > 0 && r <= 1)) {
          return "ratio " + value + " is not in (0, 1]";
        }
        return std::string();
      },
      "RATIO");
  app.add_option("--ratios", o.ratios, "recycle ratios to cache")->check(on_a_block);
  app.add_option("--out", o.out, "output directory")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("must not be empty") : std::string(); },
          "DIR"))
      ->capture_default_str();
  app.add_option("--tools-dir", o.tools_dir, "where recycle-build and recycle-train are "
                                             "(default: beside this program)");
  app.add_flag("--peer", o.peer, "also run the eager PyTorch peer and report engine/peer ratios");
  app.add_option("--peer-script", o.peer_script)->capture_default_str();
  CLI::Option* nproc_opt = app.add_option("--nproc", o.nproc,
                 "N >= 2: instead of the ratio table, data-parallel head training at 0.5 with N ranks "
                 "(engine: 1 process, then N with --grad-compression none, fp16, topk and --sync "
                 "average:K, and full fine-tuning's bytes per step) beside the PyTorch DDP peer "
                 "(bench/peers/ddp_peer.py: none, fp16, average:K); --batch is per rank, --threads "
                 "in total (split between the ranks). Writes dist.json, dist.csv, dist.md")
      ->check(CLI::Range(2, 64));
  app.add_option("--link", o.link,
                 "with --nproc: loopback (this host's, unshaped), or 1gbit / 100mbit: every "
                 "data-parallel run (engine and peer) inside its own network namespace (unshare -n) "
                 "whose loopback is shaped by tc tbf to that rate; needs root, ip and tc")
      ->check(CLI::IsMember({"loopback", "1gbit", "100mbit"}))
      ->needs(nproc_opt)
      ->capture_default_str();
  app.add_option("--grad-compressions", o.compressions,
                 "with --nproc: the engine's --grad-compression values to run with allreduce (none "
                 "always runs)")
      ->check(CLI::IsMember({"none", "fp16", "topk"}))
      ->delimiter(',')
      ->needs(nproc_opt)
      ->capture_default_str();
  app.add_option("--average-every", o.average_every, "with --nproc: K of the --sync average:K rows")
      ->check(CLI::Range(1, 1000))
      ->needs(nproc_opt)
      ->capture_default_str();
  app.add_option("--timeout", o.timeout, "with --nproc: --timeout of every data-parallel run, seconds")
      ->check(CLI::Range(1, 3600))
      ->needs(nproc_opt)
      ->capture_default_str();
  app.add_option("--ddp-peer-script", o.ddp_peer_script)->capture_default_str();
  CLI::Option* targets_opt = app.add_flag(
      "--targets", o.targets,
      "instead of the ratio table, the performance targets beside the eager PyTorch peer, each a "
      "ratio with its target (head and full fine-tuning epochs, reads against a preloaded split, "
      "build against the peer's prefix pass, int8 against fp32, training within a memory "
      "budget; see docs/performance.md). Writes targets.md, targets.json");
  app.add_option("--rounds", o.rounds, "with --targets: rounds of the speed ratios (engine and peer) and of the memory runs")
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->needs(targets_opt)
      ->capture_default_str();
  app.add_option("--memory-budget", o.budget_mb, "with --targets: --memory-budget MiB of the memory rows")
      ->check(CLI::Range(int64_t{32}, int64_t{1} << 20))
      ->needs(targets_opt)
      ->capture_default_str();
  app.add_option("--memory-samples", o.memory_samples,
                 "with --targets: training samples (of all 10 classes, at 0.25, fp32) of the memory rows")
      ->check(CLI::Range(int64_t{128}, int64_t{60000}))
      ->delimiter(',')
      ->needs(targets_opt)
      ->capture_default_str();
  CLI::Option* progressive_opt = app.add_flag(
      "--progressive", o.progressive,
      "instead of the ratio table, progressive recycling (recycle-train --freeze) beside full "
      "fine-tuning and a fixed recycle point: accuracy over --seeds seeds, total wall time with "
      "builds, and bytes sent per step per rank under --nproc 2 (docs/progressive.md). Writes "
      "progressive.json, progressive.md; --quick: 2,000 samples, 4 epochs, 3 seeds");
  app.add_option("--freeze-rules", o.freeze_rules, "with --progressive: the --freeze rules to run")
      ->delimiter(',')
      ->needs(progressive_opt)
      ->capture_default_str();
  app.add_option("--fixed-ratio", o.fixed_ratio, "with --progressive: the fixed row's recycle ratio")
      ->check(CLI::Range(0.125, 1.0))
      ->needs(progressive_opt)
      ->capture_default_str();
  app.add_option("--python", o.python, "interpreter with torch")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "recycle-bench: " << e.what() << " (see --help)" << std::endl;
    return 2;
  }
  if (o.quick) {
    auto given = [&](const char* flag) { return app.get_option(flag)->count() > 0; };
    if (!given("--samples")) o.samples = o.task == "text" ? 1000 : 2000;
    // Medians need a few epochs; the transformer needs 4 to learn the text task; freezing
    // needs epochs to freeze between.
    if (!given("--epochs")) {
      o.epochs = o.progressive || o.task == "text" ? 4 : o.nproc > 0 || o.targets ? 3 : 2;
    }
    // int8 against fp32 needs its seeds; the progressive target is over 3 seeds.
    if (!given("--seeds")) o.seeds = o.targets || o.progressive ? 3 : 1;
    if (!given("--rounds")) o.rounds = 2;
    if (!given("--memory-budget")) o.budget_mb = 64;
    if (!given("--memory-samples")) o.memory_samples = {2500, 6000};
    if (!given("--pretrain-epochs")) o.pretrain_epochs = o.task == "text" ? 3 : 1;
    if (!given("--pretrain-limit")) o.pretrain_limit = o.task == "text" ? 0 : 10000;
  }
  if (o.task == "image") {
    for (double r : o.ratios) {
      if (std::abs(r * 8 - std::round(r * 8)) > 1e-6) {
        std::cerr << "recycle-bench: --ratios: " << r
                  << " is not a multiple of 1/8 (ResNet-18 has 8 blocks) (see --help)" << std::endl;
        return 2;
      }
    }
  }
  if (o.task == "text") {
    if (app.get_option("--batch")->count() == 0) o.batch = 32;
    if (o.peer || o.nproc > 0 || o.targets) {
      std::cerr << "recycle-bench: --task text runs the ratio table only (no --peer, --nproc or "
                   "--targets) (see --help)" << std::endl;
      return 2;
    }
    if (!fs::exists(o.text_dir + "/finetune/train.tsv") || !fs::exists(o.text_dir + "/pretrain/train.tsv")) {
      std::cerr << "recycle-bench: error: " << o.text_dir
                << " has no pretrain/ and finetune/ TSV files: run scripts/fetch_spam_corpus.sh "
                << o.text_dir << " first" << std::endl;
      return 1;
    }
    o.text_dir = fs::absolute(o.text_dir).string();
  }
  if (o.progressive && (o.targets || o.nproc > 0 || o.peer || o.task == "text")) {
    std::cerr << "recycle-bench: --progressive is its own bench on the image task (no --targets, "
                 "--nproc, --peer or --task text; its data-parallel runs use 2 processes) (see "
                 "--help)" << std::endl;
    return 2;
  }
  if (o.progressive && std::abs(o.fixed_ratio * 8 - std::round(o.fixed_ratio * 8)) > 1e-6) {
    std::cerr << "recycle-bench: --fixed-ratio: " << o.fixed_ratio
              << " is not a multiple of 1/8 (ResNet-18 has 8 blocks) (see --help)" << std::endl;
    return 2;
  }
  if (o.targets && o.nproc > 0) {
    std::cerr << "recycle-bench: --targets and --nproc are two different benches (see --help)" << std::endl;
    return 2;
  }
  if (o.tools_dir.empty()) o.tools_dir = fs::canonical("/proc/self/exe").parent_path().string();
  try {
    return Bench(o).run();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    std::cerr << "recycle-bench: error: " << msg << std::endl;
    return 1;
  }
}
