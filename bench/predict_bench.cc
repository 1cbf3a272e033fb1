#include "bench/predict_bench.h"

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

namespace recycle::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kHitRates[] = {0, 50, 100};

struct Row {
  double ratio = 0;
  int hit_rate = 0;  // asked for
  int64_t samples = 0, hits = 0;
  std::vector<double> cached, full, head_share;  // per round
  int64_t agree = 0;
  double max_prob_diff = 0;

  double speed() const { return median(cached) / median(full); }  // cached time / full time
};

// A codec's agreement with the full model at ratio 0.5, every sample a hit.
struct Agreement {
  std::string codec;
  int64_t samples = 0, agree = 0;
  double max_prob_diff = 0, accuracy = 0;
};

class PredictBench {
 public:
  explicit PredictBench(PredictBenchOptions o) : o_(std::move(o)), c_(o_.common) {
    work_ = c_.work_dir();
  }
  PredictBench(const PredictBench&) = delete;
  PredictBench& operator=(const PredictBench&) = delete;

  void run() {
    ensure_encoder(&c_);
    std::vector<Row> rows;
    for (double r : o_.ratios) {
      prepare(r);
      std::vector<Row> at_r(std::size(kHitRates));
      for (size_t h = 0; h < at_r.size(); ++h) {
        at_r[h].ratio = r;
        at_r[h].hit_rate = kHitRates[h];
      }
      // Rounds in turn over the hit rates, so a slow spell of the machine hits them all.
      for (int64_t round = 0; round < o_.rounds; ++round) {
        for (Row& row : at_r) measure(&row, round);
      }
      rows.insert(rows.end(), at_r.begin(), at_r.end());
    }
    std::vector<Agreement> agreement;
    for (const char* codec : {"fp32", "fp16", "bf16", "int8"}) agreement.push_back(agree(codec));
    json peer;
    if (o_.peer) {
      note("eager PyTorch peer: full-model inference over " + std::to_string(o_.predict_samples) +
           " samples");
      peer = run_child({c_.python, c_.peer_script, "--classes", "5-9", "--limit",
                        std::to_string(o_.predict_samples), "--threads",
                        std::to_string(c_.threads_or_cores()), "--infer-only"},
                       work_)
                 .result;
    }
    report(rows, agreement, peer);
  }

 private:
  std::string dir(double r, const std::string& what) const {
    return work_ + "/predict-r" + fmt(r * 100, 0) + "-" + what;
  }
  std::vector<std::string> build(double r, const std::string& codec, const std::string& cache,
                                 const std::string& split, int64_t limit) const {
    return {c_.tool("recycle-build"), "--data", "fashion-mnist", "--classes", "5-9", "--split",
            split, "--limit", std::to_string(limit), "--weights", c_.weights, "--recycle",
            fmt(r, 3), "--codec", codec, "--cache", cache, "--threads",
            std::to_string(c_.threads), "--json"};
  }
  // Trains a head for one epoch from `cache` into `head`.
  void train_head(const std::string& cache, const std::string& head) const {
    run_child({c_.tool("recycle-train"), "--cache", cache, "--epochs", "1", "--batch",
               std::to_string(c_.batch), "--threads", std::to_string(c_.threads), "--eval-split",
               "none", "--save-head", head, "--json"},
              work_);
  }
  // recycle-predict --compare-full over the test samples, from `cache` with `head`.
  json predict(const std::string& cache, const std::string& head) const {
    return run_child({c_.tool("recycle-predict"), "--cache", cache, "--head", head, "--weights",
                      c_.weights, "--data", "fashion-mnist", "--classes", "5-9", "--split", "test",
                      "--limit", std::to_string(o_.predict_samples), "--batch",
                      std::to_string(o_.predict_batch), "--threads", std::to_string(c_.threads),
                      "--out", work_ + "/predict-rows.jsonl", "--compare-full", "--json"},
                     work_)
        .result;
  }

  // The three caches of ratio r and the head trained from the first.
  void prepare(double r) {
    note("ratio " + fmt(r, 2) + ": caches and head");
    for (const std::string what : {"0", "50", "100"}) fs::remove_all(dir(r, what));
    const std::string codec = codec_name(c_.codec);
    run_child(build(r, codec, dir(r, "0"), "train", c_.samples), work_);
    run_child(build(r, codec, dir(r, "50"), "test", o_.predict_samples / 2), work_);
    run_child(build(r, codec, dir(r, "100"), "test", o_.predict_samples), work_);
    train_head(dir(r, "0"), dir(r, "head.pt"));
  }

  // A head trained from a cache of `codec` at 0.5 (a head serves caches of its own codec only)
  // and its predictions from a cache of every test sample, beside the full model's.
  Agreement agree(const std::string& codec) {
    note("codec " + codec + ": agreement with the full model at ratio 0.5");
    const std::string train = work_ + "/predict-agree-" + codec + "-train";
    const std::string test = work_ + "/predict-agree-" + codec + "-test";
    fs::remove_all(train);
    fs::remove_all(test);
    run_child(build(0.5, codec, train, "train", c_.samples), work_);
    run_child(build(0.5, codec, test, "test", o_.predict_samples), work_);
    train_head(train, train + "-head.pt");
    const json j = predict(test, train + "-head.pt");
    Agreement a;
    a.codec = codec;
    a.samples = j.at("samples").get<int64_t>();
    a.agree = j.at("agree").get<int64_t>();
    a.max_prob_diff = j.at("max_prob_diff").get<double>();
    a.accuracy = j.at("accuracy").get<double>();
    if (j.at("hits").get<int64_t>() != a.samples) {
      throw std::runtime_error("the agreement run of " + codec + " missed the cache");
    }
    return a;
  }

  void measure(Row* row, int64_t round) {
    note("ratio " + fmt(row->ratio, 2) + ", " + std::to_string(row->hit_rate) + "% hits, round " +
         std::to_string(round + 1) + "/" + std::to_string(o_.rounds));
    const json j = predict(dir(row->ratio, std::to_string(row->hit_rate)), dir(row->ratio, "head.pt"));
    row->samples = j.at("samples").get<int64_t>();
    row->hits = j.at("hits").get<int64_t>();
    row->cached.push_back(j.at("predict_seconds").get<double>());
    const double full = j.at("full_seconds").get<double>();
    row->full.push_back(full);
    row->head_share.push_back(full > 0 ? j.at("full_head_seconds").get<double>() / full : 0);
    row->agree = j.at("agree").get<int64_t>();
    row->max_prob_diff = std::max(row->max_prob_diff, j.at("max_prob_diff").get<double>());
  }

  void report(const std::vector<Row>& rows, const std::vector<Agreement>& agreement,
              const json& peer) {
    std::ostringstream md;
    md << "recycle-predict against full-model inference in the same process (--compare-full): "
       << o_.predict_samples << " test samples of classes 5-9, batch " << o_.predict_batch
       << ", codec " << codec_name(c_.codec) << ", " << c_.threads_or_cores() << " threads, "
       << o_.rounds << " rounds (medians). Times are of the prediction loops (reading the images "
       << "included; loading the model and data not).\n\n";
    Table table({"ratio", "hits", "cached s", "full s", "cached / full", "head share of full",
                 "goal", "met", "same class"});
    json j;
    j["options"] = c_.to_json();
    j["options"].update({{"predict_samples", o_.predict_samples},
                         {"batch", o_.predict_batch},
                         {"threads", c_.threads_or_cores()},
                         {"codec", codec_name(c_.codec)},
                         {"rounds", o_.rounds},
                         {"ratios", o_.ratios}});
    for (const Row& r : rows) {
      const double share = median(r.head_share);
      // 100% hits: at most 1.2x the limit (full x head share); 0%: at most 5% slower than full.
      std::string goal = "-";
      bool met = true;
      if (r.hit_rate == 100) {
        goal = "<= " + fmt(1.2 * share, 2);
        met = r.speed() <= 1.2 * share;
      } else if (r.hit_rate == 0) {
        goal = "<= 1.05";
        met = r.speed() <= 1.05;
      }
      table.add_row({fmt(r.ratio, 2),
                     std::to_string(r.hits) + " (" + fmt(100.0 * r.hits / r.samples, 0) + "%)",
                     fmt(median(r.cached), 3), fmt(median(r.full), 3), fmt(r.speed(), 2),
                     fmt(share, 2), goal, goal == "-" ? "-" : (met ? "yes" : "no"),
                     std::to_string(r.agree) + "/" + std::to_string(r.samples)});
      j["rows"].push_back({{"ratio", r.ratio},
                           {"hit_rate", r.hit_rate},
                           {"samples", r.samples},
                           {"hits", r.hits},
                           {"cached_seconds", r.cached},
                           {"full_seconds", r.full},
                           {"head_share", r.head_share},
                           {"cached_over_full", r.speed()},
                           {"goal", goal},
                           {"met", met},
                           {"agree", r.agree},
                           {"max_prob_diff", r.max_prob_diff}});
    }
    md << table.markdown();
    md << "\nAgreement of cache hits with the full model, per codec (ratio 0.5, a head trained "
          "for one epoch from a cache of that codec, every test sample a hit):\n\n";
    Table codecs({"codec", "same class", "largest probability difference", "accuracy"});
    for (const Agreement& a : agreement) {
      codecs.add_row({a.codec, std::to_string(a.agree) + "/" + std::to_string(a.samples) + " (" +
                                   fmt(100.0 * a.agree / a.samples, 2) + "%)",
                      fmt(a.max_prob_diff, 6), fmt(a.accuracy, 4)});
      j["agreement"].push_back({{"codec", a.codec},
                                {"samples", a.samples},
                                {"agree", a.agree},
                                {"max_prob_diff", a.max_prob_diff},
                                {"accuracy", a.accuracy}});
    }
    md << codecs.markdown();
    if (!peer.is_null()) {
      md << "\nEager PyTorch peer (eval mode, no_grad, batch " << peer.value("batch", 0)
         << ", images preprocessed in memory first): full-model inference over "
         << peer.value("samples", 0) << " samples in " << fmt(peer.value("infer_seconds", 0.0), 3)
         << " s.\n";
      j["peer"] = peer;
    }
    md << "\nThe Embedding Recycling paper (Saad-Falcon et al., EACL Findings 2023) reports "
          "55-91% inference speedups when the frozen layers' outputs are reused.\n";
    write_json(work_ + "/predict.json", j);
    write_text(work_ + "/predict.md", md.str());
    std::cout << md.str() << "\nwrote " << work_ << "/predict.json, predict.md" << std::endl;
  }

  PredictBenchOptions o_;
  CommonOptions& c_;  // o_.common
  std::string work_;
};

}  // namespace

CLI::Option* add_predict_flags(CLI::App* app, PredictBenchOptions* o) {
  CLI::Option* predict = app->add_flag(
      "--predict", o->selected,
      "instead of the ratio table, recycle-predict at 0/50/100% cache hits and ratios "
      "0.25/0.5/0.75 against full-model inference in the same process (docs/predict.md). "
      "Writes predict.json, predict.md; --quick: 1,000 test samples, 1 round");
  app->add_option("--predict-samples", o->predict_samples, "with --predict: test samples predicted")
      ->check(CLI::Range(int64_t{2}, int64_t{5000}))
      ->needs(predict)
      ->capture_default_str();
  app->add_option("--predict-ratios", o->ratios, "with --predict: the recycle ratios")
      ->delimiter(',')
      ->check(CLI::Range(0.125, 1.0))
      ->needs(predict)
      ->capture_default_str();
  app->add_option("--predict-rounds", o->rounds, "with --predict: rounds (medians over them)")
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->needs(predict)
      ->capture_default_str();
  app->add_flag("--predict-peer", o->peer,
                "with --predict: also the eager PyTorch peer's full-model inference "
                "(needs python3-torch)")
      ->needs(predict);
  return predict;
}

void apply_predict_defaults(const CLI::App& app, PredictBenchOptions* o) {
  if (!o->common.quick) return;
  if (!given(app, "--predict-samples")) o->predict_samples = 1000;
  if (!given(app, "--predict-rounds")) o->rounds = 1;
  if (!given(app, "--samples")) o->common.samples = 500;
}

void run_predict_bench(PredictBenchOptions options) { PredictBench(std::move(options)).run(); }

}  // namespace recycle::bench
