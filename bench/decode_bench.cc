#include "bench/decode_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/stats.h"
#include "bench/bench_util.h"
#include "bench/report_table.h"
#include "engine/data/image_stream.h"
#include "engine/util/parallel_loop.h"

namespace recycle::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kBatch = 256;  // the peer's DataLoader batch and the engine's chunk here
// The normalisation both sides apply (Fashion-MNIST's, every channel).
constexpr float kMean = 0.2860f, kStd = 0.3530f;

struct Folder {
  std::string name;       // png28 | jpeg224
  std::string root;       // the ImageFolder root (its train/ split)
  std::string transform;  // the engine's --transform
  int channels = 1;       // the peer's --channels
  int64_t samples = 0;
};

struct Side {
  std::vector<double> rate;  // images/s (decode) or samples/s (build), per round
};

// One pass of the engine's image folder reader over `f` into float32 batches: what
// recycle-build and recycle-train read with (load_dataset + ImageStream: files decoded and
// transformed in parallel, a chunk at a time), then pixels/255, minus the mean, over the std.
// Returns images/s; the folder listing is outside the timing, as the peer's ImageFolder is.
double engine_decode_rate(const Folder& f, int threads) {
  omp_set_num_threads(threads);
  DatasetOptions o;
  o.spec = "imagefolder:" + f.root;
  o.split = "train";
  o.transform = f.transform;
  StreamedImages images;
  const Dataset data = load_dataset(o, &images);
  const auto start = std::chrono::steady_clock::now();
  ImageStream stream(data, images);
  const int64_t n = static_cast<int64_t>(data.size());
  const int64_t item = data.item_shape[0] * data.item_shape[1] * data.item_shape[2];
  std::vector<uint8_t> pixels(static_cast<size_t>(kBatch * item));
  std::vector<float> batch(pixels.size());
  std::vector<int64_t> positions(kBatch);
  double checksum = 0;
  for (int64_t b = 0; b < n; b += kBatch) {
    const int64_t m = std::min(kBatch, n - b);
    std::iota(positions.begin(), positions.begin() + m, b);
    stream.read(positions.data(), m, pixels.data());
    parallel_loop(m, [&](int64_t i) {
      const uint8_t* in = pixels.data() + i * item;
      float* out = batch.data() + i * item;
      for (int64_t k = 0; k < item; ++k) out[k] = (in[k] / 255.0f - kMean) / kStd;
    });
    checksum += batch[0];  // keeps the batch alive
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (checksum != checksum) throw std::runtime_error("decode bench: NaN pixels");
  return static_cast<double>(n) / s;
}

class DecodeBench {
 public:
  explicit DecodeBench(DecodeBenchOptions o) : o_(std::move(o)), c_(o_.common) {
    work_ = c_.work_dir();
  }

  void run() {
    const int threads = c_.threads_or_cores();
    std::vector<Folder> folders = {
        {"png28", work_ + "/decode-png28/train", "", 1, o_.samples},
        {"jpeg224", work_ + "/decode-jpeg224/train", "rgb", 3, o_.jpeg_samples}};
    export_folder(folders[0], {"--format", "png"});
    export_folder(folders[1], {"--format", "jpeg", "--size", "224"});
    std::vector<Side> engine_decode(folders.size()), peer_decode(folders.size());
    Side engine_build, peer_build;
    for (int64_t round = 0; round < o_.rounds; ++round) {
      const bool engine_first = round % 2 == 0;
      const std::string of = " (round " + std::to_string(round + 1) + "/" +
                             std::to_string(o_.rounds) + ")";
      for (size_t i = 0; i < folders.size(); ++i) {
        const Folder& f = folders[i];
        for (int side = 0; side < 2; ++side) {
          if ((side == 0) == engine_first) {
            note("engine: decode " + f.name + of);
            engine_decode[i].rate.push_back(engine_decode_rate(f, threads));
          } else {
            note("peer: decode " + f.name + of);
            const json p = peer({"--decode", f.root, "--channels", std::to_string(f.channels)});
            peer_decode[i].rate.push_back(p.at("images_per_s").get<double>());
          }
        }
      }
      for (int side = 0; side < 2; ++side) {
        if ((side == 0) == engine_first) {
          note("engine: recycle-build of png28 at 0.5" + of);
          engine_build.rate.push_back(build(folders[0]));
        } else {
          note("peer: prefix pass over png28" + of);
          const json p = peer({"--prefix", folders[0].root});
          peer_build.rate.push_back(p.at("samples_per_s").get<double>());
        }
      }
    }
    report(folders, engine_decode, peer_decode, engine_build, peer_build, threads);
  }

 private:
  json peer(std::vector<std::string> args) {
    std::vector<std::string> argv = {c_.python, o_.peer_script, "--workers", "2", "--threads",
                                     std::to_string(c_.threads_or_cores())};
    append(&argv, args);
    return run_child(argv, work_).result;
  }

  void export_folder(const Folder& f, const std::vector<std::string>& format) {
    const fs::path root = fs::path(f.root).parent_path();
    const fs::path stamp = root / ("exported-" + std::to_string(f.samples));
    if (fs::exists(stamp)) return;
    fs::remove_all(root);
    note("exporting " + std::to_string(f.samples) + " samples as " + f.name + " to " +
         root.string());
    std::vector<std::string> argv = {c_.python, o_.peer_script, "--export", root.string(),
                                     "--limit", std::to_string(f.samples)};
    append(&argv, format);
    run_child(argv, work_);
    write_text(stamp.string(), "");
  }

  // recycle-build's samples/s over the folder at 0.5 into a fresh cache (its report's seconds).
  double build(const Folder& f) {
    const std::string cache = work_ + "/decode-build-cache";
    const ChildRun r = run_child({c_.tool("recycle-build"), "--data", "imagefolder:" + f.root,
                                  "--recycle", "0.5", "--cache", cache, "--rebuild", "--codec",
                                  "fp16", "--threads", std::to_string(c_.threads_or_cores()),
                                  "--json"},
                                 work_);
    return r.result.at("samples").get<double>() / r.result.at("seconds").get<double>();
  }

  static std::vector<double> ratios(const Side& engine, const Side& peer) {
    std::vector<double> r;
    for (size_t i = 0; i < engine.rate.size(); ++i) r.push_back(engine.rate[i] / peer.rate[i]);
    return r;
  }

  void report(const std::vector<Folder>& folders, const std::vector<Side>& engine_decode,
              const std::vector<Side>& peer_decode, const Side& engine_build,
              const Side& peer_build, int threads) {
    std::ostringstream md;
    md << "The engine's image folder reader against torchvision's ImageFolder + "
          "DataLoader(num_workers=2), "
       << o_.rounds << " round(s) in turn, " << threads
       << " threads; rates are medians over rounds, a ratio is the median of the per-round "
          "ratios (spread: lowest-highest).\n\n";
    Table t({"row", "images", "engine /s", "peer /s", "engine / peer", "spread", "goal", "met"});
    json j;
    j["options"] = {{"samples", o_.samples},
                    {"jpeg_samples", o_.jpeg_samples},
                    {"rounds", o_.rounds},
                    {"threads", threads}};
    auto add = [&](const std::string& row, int64_t images, const Side& e, const Side& p,
                   double goal) {
      const std::vector<double> r = ratios(e, p);
      const double m = median(r);
      const auto [lo, hi] = std::minmax_element(r.begin(), r.end());
      t.add_row({row, std::to_string(images), fmt(median(e.rate), 1), fmt(median(p.rate), 1),
                 fmt(m, 2), fmt(*lo, 2) + "-" + fmt(*hi, 2), ">= " + fmt(goal, 1),
                 m >= goal ? "yes" : "no"});
      j["rows"].push_back({{"row", row},
                           {"images", images},
                           {"engine_per_s", e.rate},
                           {"peer_per_s", p.rate},
                           {"ratio", m},
                           {"ratios", r},
                           {"goal", goal},
                           {"met", m >= goal}});
    };
    for (size_t i = 0; i < folders.size(); ++i) {
      add("decode+transform " + folders[i].name, folders[i].samples, engine_decode[i],
          peer_decode[i], 2.0);
    }
    add("build at 0.5 (png28) vs prefix pass", folders[0].samples, engine_build, peer_build, 1.5);
    md << t.markdown();
    write_json(work_ + "/decode.json", j);
    write_text(work_ + "/decode.md", md.str());
    std::cout << md.str() << "\nwrote " << work_ << "/decode.json, decode.md" << std::endl;
  }

  DecodeBenchOptions o_;
  CommonOptions& c_;  // o_.common
  std::string work_;
};

}  // namespace

CLI::Option* add_decode_flags(CLI::App* app, DecodeBenchOptions* o) {
  CLI::Option* decode = app->add_flag(
      "--decode", o->selected,
      "instead of the ratio table, the image folder reader (decode + transform, and "
      "recycle-build over a folder) against torchvision's ImageFolder + DataLoader(num_workers=2) "
      "on PNG and JPEG exports of Fashion-MNIST (bench/peers/imagefolder_peer.py). Writes "
      "decode.json, decode.md; --quick: 1,000 PNGs, 200 JPEGs, 1 round");
  app->add_option("--decode-samples", o->samples, "with --decode: 28x28 gray PNGs exported")
      ->check(CLI::Range(int64_t{256}, int64_t{30000}))
      ->needs(decode)
      ->capture_default_str();
  app->add_option("--decode-jpeg-samples", o->jpeg_samples,
                  "with --decode: 224x224 RGB JPEGs exported")
      ->check(CLI::Range(int64_t{16}, int64_t{30000}))
      ->needs(decode)
      ->capture_default_str();
  app->add_option("--decode-rounds", o->rounds, "with --decode: rounds (medians over them)")
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->needs(decode)
      ->capture_default_str();
  return decode;
}

void apply_decode_defaults(const CLI::App& app, DecodeBenchOptions* o) {
  if (!o->common.quick) return;
  if (!given(app, "--decode-samples")) o->samples = 1000;
  if (!given(app, "--decode-jpeg-samples")) o->jpeg_samples = 200;
  if (!given(app, "--decode-rounds")) o->rounds = 1;
}

void run_decode_bench(DecodeBenchOptions options) { DecodeBench(std::move(options)).run(); }

}  // namespace recycle::bench
