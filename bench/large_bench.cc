#include "bench/large_bench.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/stats.h"
#include "bench/bench_util.h"
#include "bench/report_table.h"

namespace recycle::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A record of 64x28x28 fp16 values and its header (what recycle-inspect reports for this
// layout): used only to pick how many samples make the asked size.
constexpr double kRecordBytes = 100384;
constexpr int64_t kTrainImages = 60000;  // Fashion-MNIST's training split
constexpr size_t kChunk = 1 << 20;       // the disk's reads and writes: 1 MB at a time

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void drop_page_cache() {
  ::sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  f << "1\n";
  f.flush();
  if (!f) {
    throw std::runtime_error(
        "cannot drop the page cache (writing /proc/sys/vm/drop_caches needs root): --large "
        "measures cold reads");
  }
}

uint64_t directory_bytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const uintmax_t size = e.is_regular_file(ec) ? e.file_size(ec) : 0;
    if (!ec) total += size;  // a file deleted since the listing counts nothing
  }
  return total;
}

// Reads every file of `dir` in name order, 1 MB at a time: the disk's sequential read rate
// over the same bytes (MB/s).
double read_files_rate(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<char> buffer(kChunk);
  uint64_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const fs::path& p : files) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // a file that went meanwhile (RocksDB's LOG rotation)
    for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) bytes += n;
    ::close(fd);
  }
  return bytes / since(start) / 1e6;
}

// Writes `bytes` to `path` 1 MB at a time and waits for the disk (fdatasync): the disk's
// sequential write rate (MB/s). The file is removed.
double write_file_rate(const std::string& path, uint64_t bytes) {
  std::vector<char> buffer(kChunk);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<char>(i * 2654435761u >> 13);
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + path);
  uint64_t written = 0;
  bool ok = true;
  while (ok && written < bytes) {
    const ssize_t n = ::write(fd, buffer.data(), buffer.size());
    ok = n > 0;
    written += ok ? n : 0;
  }
  ok = ok && ::fdatasync(fd) == 0;
  ::close(fd);
  const double seconds = since(start);
  fs::remove(path);
  if (!ok) throw std::runtime_error("writing " + path + " failed (disk full?)");
  return written / seconds / 1e6;
}

// What one core does to bytes with nothing else, MB/s: memcpy and XXH3-64 (the record's own
// check) over a buffer of 256 MB (far beyond the caches, as a warm epoch's records are), the
// median of 5 passes each. The warm epoch's rate per core is set beside them.
struct OneCore {
  double memcpy_mb_per_s = 0, xxh3_mb_per_s = 0;
};
OneCore one_core_rates() {
  constexpr size_t kBytes = size_t{256} << 20;
  std::vector<char> from(kBytes), to(kBytes);
  for (size_t i = 0; i < kBytes; ++i) from[i] = static_cast<char>(i * 2654435761u >> 13);
  std::vector<double> copies, hashes;
  uint64_t sink = 0;
  for (int pass = 0; pass < 5; ++pass) {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), kBytes);
    copies.push_back(kBytes / since(start) / 1e6);
    start = std::chrono::steady_clock::now();
    sink += XXH3_64bits(from.data(), kBytes);
    hashes.push_back(kBytes / since(start) / 1e6);
  }
  if (sink == 42 && to[1] == 3) std::cerr << "";  // keeps both from being optimised away
  return {median(copies), median(hashes)};
}

// The largest size `dir` reached while `run` ran, polled every 200 ms.
template <typename Run>
uint64_t peak_bytes_while(const std::string& dir, Run run) {
  std::atomic<bool> done{false};
  std::atomic<uint64_t> peak{0};
  std::thread watch([&] {
    while (!done) {
      peak = std::max<uint64_t>(peak, directory_bytes(dir));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  try {
    run();
  } catch (...) {
    done = true;
    watch.join();
    throw;
  }
  done = true;
  watch.join();
  return std::max<uint64_t>(peak, directory_bytes(dir));
}

struct Epoch {
  double seconds = 0;   // the epoch's, from recycle-train's report
  double mb_per_s = 0;  // the records it read over those seconds
  double peak_mb = 0;   // the process's peak RSS
};

struct Round {
  double disk_mb_per_s = 0;  // the cache's files read in order, cold
  Epoch cold, warm;
  Epoch one_reader;  // cold, each batch read by one MultiGet (RECYCLE_READ_THREADS=1)
  Epoch warm_verified;  // warm, RocksDB's checksums verified too (RECYCLE_VERIFY_READS=1)
  Epoch loader, loader_one_reader;  // recycle.CachedLoader's, cold (when --python has recycle)
  OneCore core;                     // memcpy and XXH3 on one core, right after the warm epoch
};

std::string spread(const std::vector<double>& v, int digits) {
  if (v.empty()) return "-";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return fmt(median(v), digits) + " (" + fmt(*lo, digits) + "-" + fmt(*hi, digits) + ")";
}

class LargeBench {
 public:
  explicit LargeBench(LargeBenchOptions o) : o_(std::move(o)), c_(o_.common) {
    work_ = c_.work_dir() + "/large";
  }

  void run() {
    drop_page_cache();  // refused before anything is built when this is not root
    fs::create_directories(work_);
    const std::string cache = work_ + "/cache", small = work_ + "/small";
    const double bytes = o_.gigabytes * 1e9;
    views_ = std::max<int64_t>(1, static_cast<int64_t>(
                                      std::ceil(bytes / (kTrainImages * kRecordBytes))));
    samples_ = std::min<int64_t>(
        kTrainImages, static_cast<int64_t>(std::ceil(bytes / (views_ * kRecordBytes))));
    if (!(o_.keep && fs::exists(cache + "/CURRENT"))) {
      fs::remove_all(cache);
      build_large(cache);
    } else {
      note("using the cache a run before left in " + cache + " (--large-keep)");
    }
    fs::remove_all(small);
    build(small, 256, {});
    record_bytes_ = inspect(cache);
    head_ = work_ + "/pool_linear_head.pt";
    make_head(head_);
    python_loader_ = has_python_package();
    disk_write_mb_per_s_ = write_file_rate(work_ + "/disk-write-test", cache_bytes_);
    small_ = epoch(small, false);
    std::vector<Round> rounds;
    for (int64_t r = 0; r < c_.seeds; ++r) {
      note("round " + std::to_string(r + 1) + " of " + std::to_string(c_.seeds));
      Round round;
      drop_page_cache();
      round.disk_mb_per_s = read_files_rate(cache);
      round.cold = epoch(cache, true);
      round.warm = epoch(cache, false);
      round.core = one_core_rates();
      round.one_reader = epoch(cache, true, "1");
      round.warm_verified = epoch(cache, false, "", "1");
      if (python_loader_) {
        round.loader = loader_epoch(cache, "");
        round.loader_one_reader = loader_epoch(cache, "1");
      }
      rounds.push_back(round);
    }
    report(rounds);
    fs::remove_all(small);
    if (!o_.keep) fs::remove_all(cache);
  }

 private:
  std::vector<std::string> build_args(const std::string& cache, int64_t samples) const {
    return {c_.tool("recycle-build"), "--data", "fashion-mnist", "--split", "train", "--limit",
            std::to_string(samples), "--augment", "hflip", "--views", std::to_string(views_),
            "--model", "resnet18", "--width", "64", "--split-at", "layer1.1", "--codec", "fp16",
            "--cache", cache, "--threads", std::to_string(c_.threads), "--json"};
  }
  ChildRun build(const std::string& cache, int64_t samples, const std::vector<std::string>& more) {
    note("build " + cache + ": " + std::to_string(samples) + " samples, " +
         std::to_string(views_) + " views each");
    std::vector<std::string> argv = build_args(cache, samples);
    append(&argv, more);
    return run_child(argv, work_);
  }
  void build_large(const std::string& cache) {
    ChildRun r;
    build_peak_bytes_ = peak_bytes_while(cache, [&] { r = build(cache, samples_, {}); });
    build_seconds_ = r.seconds;
    prefix_seconds_ = r.result.value("prefix_seconds", 0.0);
  }
  // The cache's bytes on disk and its records' mean size.
  double inspect(const std::string& cache) {
    const ChildRun r = run_child({c_.tool("recycle-inspect"), "--cache", cache, "--json"}, work_);
    cache_bytes_ = directory_bytes(cache);
    records_ = r.result.at("records").get<int64_t>();
    return r.result.at("record_bytes").get<double>() / records_;
  }
  // A head that averages each channel and classifies: the step costs little beside the read.
  void make_head(const std::string& path) {
    const std::string code =
        "import sys, torch\n"
        "head = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),\n"
        "                           torch.nn.Linear(64, 10))\n"
        "torch.jit.script(head).save(sys.argv[1])\n"
        "print('{}')\n";
    run_child({c_.python, "-c", code, path}, work_);
  }
  // Whether --python imports recycle (the package of this build, scripts/install_python.sh).
  bool has_python_package() {
    const ChildExit e = spawn_child({c_.python, "-c", "import recycle"}, work_);
    if (!e.ok()) note("no recycle.CachedLoader rows: " + c_.python + " cannot import recycle");
    return e.ok();
  }
  // One cold epoch of recycle.CachedLoader (shuffled, batch --batch, block_cache_mb
  // --large-budget) under --python; RECYCLE_READ_THREADS=read_threads unless that is empty.
  Epoch loader_epoch(const std::string& cache, const std::string& read_threads) {
    const std::string code =
        "import json, sys, time\n"
        "import recycle\n"
        "loader = recycle.CachedLoader(sys.argv[1], 'train', batch_size=int(sys.argv[2]),\n"
        "                              shuffle=True, block_cache_mb=int(sys.argv[3]))\n"
        "start, n = time.time(), 0\n"
        "for _, labels in loader:\n"
        "    n += len(labels)\n"
        "print(json.dumps({'seconds': time.time() - start, 'samples': n}))\n";
    const ChildRun r = run_epoch({c_.python, "-c", code, cache, std::to_string(c_.batch),
                                  std::to_string(o_.budget_mb)},
                                 true, read_threads);
    return epoch_of(r, r.result.at("seconds").get<double>(),
                    r.result.at("samples").get<double>());
  }
  // One epoch of recycle-train from `cache`, the page cache dropped first when `cold`;
  // RECYCLE_READ_THREADS=read_threads and RECYCLE_VERIFY_READS=verify unless they are empty.
  Epoch epoch(const std::string& cache, bool cold, const std::string& read_threads = "",
              const std::string& verify = "") {
    const ChildRun r = run_epoch(
        {c_.tool("recycle-train"), "--cache", cache, "--script-head", head_, "--memory-budget",
         std::to_string(o_.budget_mb), "--epochs", "1", "--eval-split", "none", "--batch",
         std::to_string(c_.batch), "--threads", std::to_string(c_.threads), "--json"},
        cold, read_threads, verify);
    return epoch_of(r, r.result.at("epoch_seconds").at(0).get<double>(),
                    r.result.at("train_samples").get<double>());
  }
  // Runs an epoch's child, the page cache dropped first when `cold`, with
  // RECYCLE_READ_THREADS=read_threads and RECYCLE_VERIFY_READS=verify unless they are empty.
  ChildRun run_epoch(const std::vector<std::string>& argv, bool cold,
                     const std::string& read_threads, const std::string& verify = "") {
    if (cold) drop_page_cache();
    if (!read_threads.empty()) ::setenv("RECYCLE_READ_THREADS", read_threads.c_str(), 1);
    if (!verify.empty()) ::setenv("RECYCLE_VERIFY_READS", verify.c_str(), 1);
    struct Unset {
      ~Unset() {
        ::unsetenv("RECYCLE_READ_THREADS");
        ::unsetenv("RECYCLE_VERIFY_READS");
      }
    } unset;
    return run_child(argv, work_);
  }
  // The epoch's figures: `samples` records read in `seconds`, and the child's peak RSS.
  Epoch epoch_of(const ChildRun& r, double seconds, double samples) const {
    Epoch e;
    e.seconds = seconds;
    e.mb_per_s = samples * record_bytes_ / seconds / 1e6;
    e.peak_mb = r.peak_mb;
    return e;
  }

  void report(const std::vector<Round>& rounds) {
    std::vector<double> disk, cold, warm, cold_s, warm_s, ratio, rss, over, one, gain;
    std::vector<double> verified, one_checksum;
    std::vector<double> loader, loader_one, loader_ratio, loader_rss;
    std::vector<double> warm_core, vs_memcpy, vs_xxh3;
    for (const Round& r : rounds) {
      disk.push_back(r.disk_mb_per_s);
      cold.push_back(r.cold.mb_per_s);
      warm.push_back(r.warm.mb_per_s);
      cold_s.push_back(r.cold.seconds);
      warm_s.push_back(r.warm.seconds);
      ratio.push_back(r.cold.mb_per_s / r.disk_mb_per_s);
      rss.push_back(r.cold.peak_mb);
      over.push_back(r.cold.peak_mb - small_.peak_mb);
      one.push_back(r.one_reader.mb_per_s);
      gain.push_back(r.cold.mb_per_s / r.one_reader.mb_per_s);
      verified.push_back(r.warm_verified.mb_per_s);
      one_checksum.push_back(r.warm.mb_per_s / r.warm_verified.mb_per_s);
      const double per_core = r.warm.mb_per_s / c_.threads_or_cores();
      warm_core.push_back(per_core);
      vs_memcpy.push_back(per_core / r.core.memcpy_mb_per_s);
      vs_xxh3.push_back(per_core / r.core.xxh3_mb_per_s);
      if (python_loader_) {
        loader.push_back(r.loader.mb_per_s);
        loader_one.push_back(r.loader_one_reader.mb_per_s);
        loader_ratio.push_back(r.loader.mb_per_s / r.disk_mb_per_s);
        loader_rss.push_back(r.loader.peak_mb);
      }
    }
    const double write_mb_per_s = cache_bytes_ / build_seconds_ / 1e6;
    const double outside_prefix = build_seconds_ - prefix_seconds_;
    std::ostringstream md;
    md << "A cache of " << bytes_text(cache_bytes_) << " (" << records_ << " records of "
       << bytes_text(record_bytes_) << ": " << samples_ << " Fashion-MNIST training images, "
       << views_ << " views each, through a width-64 ResNet-18 to layer1.1, fp16). One epoch "
       << "of recycle-train reads one view of each sample, with a pooling and linear "
       << "TorchScript head, --memory-budget " << o_.budget_mb << ", batch " << c_.batch << ", "
       << c_.threads_or_cores() << " threads; the page cache dropped before the disk's read and "
       << "before the cold epoch; " << rounds.size() << " rounds (median, lowest-highest).\n\n";
    Table reads({"measure", "median (range)"});
    reads.add_row({"disk: the cache's files read in order, MB/s", spread(disk, 0)});
    reads.add_row({"cold epoch: records read, MB/s", spread(cold, 0)});
    reads.add_row({"cold epoch / disk", spread(ratio, 2)});
    reads.add_row({"cold epoch, each batch read by one MultiGet (RECYCLE_READ_THREADS=1), MB/s",
                   spread(one, 0)});
    reads.add_row({"cold epoch: read threads of the store / one MultiGet", spread(gain, 2)});
    reads.add_row({"cold epoch, s", spread(cold_s, 2)});
    reads.add_row({"warm epoch (page cache holds the records), s", spread(warm_s, 2)});
    reads.add_row({"warm epoch: records read, MB/s", spread(warm, 0)});
    reads.add_row({"warm epoch, RocksDB's checksums verified too (RECYCLE_VERIFY_READS=1), MB/s",
                   spread(verified, 0)});
    reads.add_row({"warm epoch: the record's checksum alone / both", spread(one_checksum, 2)});
    const std::string cores = std::to_string(c_.threads_or_cores());
    reads.add_row({"warm epoch: records read per core (over " + cores + " threads), MB/s",
                   spread(warm_core, 0)});
    reads.add_row({"warm epoch per core / memcpy on one core", spread(vs_memcpy, 3)});
    reads.add_row({"warm epoch per core / XXH3-64 on one core", spread(vs_xxh3, 3)});
    reads.add_row({"cold epoch's peak RSS, MB", spread(rss, 0)});
    if (python_loader_) {
      reads.add_row({"recycle.CachedLoader, cold epoch, MB/s", spread(loader, 0)});
      reads.add_row({"recycle.CachedLoader, cold epoch / disk", spread(loader_ratio, 2)});
      reads.add_row({"recycle.CachedLoader, cold, RECYCLE_READ_THREADS=1, MB/s",
                     spread(loader_one, 0)});
      reads.add_row({"recycle.CachedLoader, cold epoch's peak RSS (the Python process), MB",
                     spread(loader_rss, 0)});
    }
    reads.add_row({"the same epoch from a cache of 256 samples: peak RSS, MB (the constant)",
                   fmt(small_.peak_mb, 0)});
    reads.add_row({"cold epoch's peak RSS - the constant, MB (budget " +
                       std::to_string(o_.budget_mb) + ")",
                   spread(over, 0)});
    md << reads.markdown() << "\n";
    Table writes({"build", "figure"});
    if (build_seconds_ > 0) {
      writes.add_row({"build seconds (of them the prefix's forward)",
                      fmt(build_seconds_, 1) + " (" + fmt(prefix_seconds_, 1) + ")"});
      writes.add_row({"cache bytes over the build's seconds, MB/s", fmt(write_mb_per_s, 0)});
      writes.add_row({"cache bytes over the seconds outside the prefix, MB/s",
                      outside_prefix > 0 ? fmt(cache_bytes_ / outside_prefix / 1e6, 0) : "-"});
      writes.add_row({"largest size of the cache's directory during the build / final size",
                      fmt(static_cast<double>(build_peak_bytes_) / cache_bytes_, 2)});
    }
    writes.add_row({"disk: a file of the cache's size written in order (fdatasync), MB/s",
                    fmt(disk_write_mb_per_s_, 0)});
    md << writes.markdown();
    json j;
    j["options"] = {{"gigabytes", o_.gigabytes}, {"budget_mb", o_.budget_mb},
                    {"batch", c_.batch},         {"threads", c_.threads_or_cores()},
                    {"rounds", c_.seeds},        {"samples", samples_},
                    {"views", views_}};
    j["cache_bytes"] = cache_bytes_;
    j["records"] = records_;
    j["record_bytes"] = record_bytes_;
    j["build"] = {{"seconds", build_seconds_},
                  {"prefix_seconds", prefix_seconds_},
                  {"peak_directory_bytes", build_peak_bytes_},
                  {"disk_write_mb_per_s", disk_write_mb_per_s_}};
    j["constant_peak_rss_mb"] = small_.peak_mb;
    for (const Round& r : rounds) {
      j["rounds"].push_back({{"disk_read_mb_per_s", r.disk_mb_per_s},
                             {"cold_epoch_seconds", r.cold.seconds},
                             {"cold_mb_per_s", r.cold.mb_per_s},
                             {"cold_peak_rss_mb", r.cold.peak_mb},
                             {"warm_epoch_seconds", r.warm.seconds},
                             {"warm_mb_per_s", r.warm.mb_per_s},
                             {"warm_verified_mb_per_s", r.warm_verified.mb_per_s},
                             {"memcpy_one_core_mb_per_s", r.core.memcpy_mb_per_s},
                             {"xxh3_one_core_mb_per_s", r.core.xxh3_mb_per_s},
                             {"one_reader_cold_mb_per_s", r.one_reader.mb_per_s},
                             {"loader_cold_mb_per_s", r.loader.mb_per_s},
                             {"loader_cold_peak_rss_mb", r.loader.peak_mb},
                             {"loader_one_reader_cold_mb_per_s", r.loader_one_reader.mb_per_s}});
    }
    write_json(c_.work_dir() + "/large.json", j);
    write_text(c_.work_dir() + "/large.md", md.str());
    std::cout << md.str() << "\nwrote " << c_.work_dir() << "/large.json, large.md" << std::endl;
  }

  LargeBenchOptions o_;
  CommonOptions& c_;  // o_.common
  std::string work_;
  int64_t views_ = 1, samples_ = 0, records_ = 0;
  double record_bytes_ = 0, build_seconds_ = 0, prefix_seconds_ = 0;
  uint64_t cache_bytes_ = 0, build_peak_bytes_ = 0;
  double disk_write_mb_per_s_ = 0;
  std::string head_;
  Epoch small_;
  bool python_loader_ = false;
};

}  // namespace

CLI::Option* add_large_flags(CLI::App* app, LargeBenchOptions* o) {
  app->add_option("--large-budget", o->budget_mb,
                  "with --large: recycle-train's --memory-budget (MB)")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 20))
      ->capture_default_str();
  app->add_flag("--large-keep", o->keep,
                "with --large: keep the cache, and use one a run before kept instead of building");
  return app
      ->add_option_function<double>(
          "--large",
          [o](double gb) {
            o->selected = true;
            o->gigabytes = gb;
          },
          "instead of the ratio table, a cache of GB gigabytes (e.g. 8) read cold, as root: one "
          "epoch's read rate against the disk's, its peak RSS against --large-budget, and the "
          "build's write rate (docs/scale.md). Writes large.json, large.md")
      ->check(CLI::Range(0.1, 500.0));
}

void run_large_bench(LargeBenchOptions options) { LargeBench(std::move(options)).run(); }

}  // namespace recycle::bench
