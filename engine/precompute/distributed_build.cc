// A distributed build: who reads, computes and writes what.
//
// Every rank loads the inputs (dataset, keyer, model and weights) itself and keys every
// sample. Rank 0 alone opens the cache, for writing, and holds its writer lock to the end; the
// other ranks never open it, they only write record files into its staging area.
//   1. Every rank but 0 publishes what it is about to build (build/inputs/R): the manifest it
//      asks for (model, prefix fingerprint, split point, keyer, codec, preprocessing, shapes,
//      classes), the data's description and a hash of every key and label. Rank 0 compares each
//      with its own and stops the job with one line naming the rank and the field that differs.
//   2. Rank 0 opens and reconciles the cache and plans the split as a 1-process build does. If
//      the split is complete and unchanged, the plan says so (build/plan) and nobody computes.
//      Otherwise it marks the split incomplete, finds what a 1-process build would compute,
//      batch by batch (per --batch positions to write, the distinct keys without a stored
//      record, found by MultiGet), makes the run's staging directory
//      CACHE/recycle-staging/run-ID and publishes the plan (build/plan) and those batches of
//      sample positions, in split order (build/batches, 8 bytes a number).
//   3. Every rank, 0 included, takes the batches j with j % W == rank, runs the prefix on
//      each (so every record comes from the same batch as in one process, and has the same
//      bytes), encodes the records and writes them, sorted by key, into record files in the
//      run's directory (one file per stage_file_bytes of records, so memory stays bounded),
//      then publishes their names and counts (build/done/R).
//   4. Rank 0 waits for every rank's files and ingests them in one atomic step (moved into the
//      cache; checksums verified first; the manifest's counts written with them, see
//      ActivationStore::ingest_records), then writes the samples index and the counts in
//      batches and marks the split complete, as a 1-process build does, and removes the run's
//      directory. It publishes the report (build/final); every other rank acknowledges it
//      (build/ack/R) before it exits, and rank 0 waits for that, since the job's store may live
//      in rank 0's process.
// A failure on any rank is published (BuildGroup::fail) and ends every rank with one line. Until
// the ingest nothing in the cache changes but the split's manifest entry (incomplete); a killed
// build leaves files in the staging area, which the next writer's open removes, and a rerun
// computes what is still missing.

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/coding.h"
#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "engine/precompute/build_group.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/build_stages.h"
#include "engine/precompute/rank_board.h"
#include "engine/util/progress.h"

namespace recycle {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The batches to compute: [count] then per batch [size] [positions...], 8 bytes each.
std::string encode_batches(const std::vector<std::vector<int64_t>>& batches) {
  std::string out;
  put_le64(&out, batches.size());
  for (const auto& batch : batches) {
    put_le64(&out, batch.size());
    for (int64_t p : batch) put_le64(&out, static_cast<uint64_t>(p));
  }
  return out;
}

// The batches of items (KeyPlan::compute_item: a position, or with views a position and a
// view), each below `items`.
std::vector<std::vector<int64_t>> decode_batches(const std::string& bytes, int64_t items) {
  size_t at = 0;
  auto next = [&]() -> uint64_t {
    if (at + 8 > bytes.size()) throw std::runtime_error("rank 0's plan is malformed");
    const uint64_t v = get_le64(bytes.data() + at);
    at += 8;
    return v;
  };
  const uint64_t count = next();
  if (count > bytes.size() / 8) throw std::runtime_error("rank 0's plan is malformed");
  std::vector<std::vector<int64_t>> out(count);
  for (auto& batch : out) {
    const uint64_t size = next();
    if (size > bytes.size() / 8) throw std::runtime_error("rank 0's plan is malformed");
    for (uint64_t i = 0; i < size; ++i) {
      const int64_t p = static_cast<int64_t>(next());
      if (p < 0 || p >= items) throw std::runtime_error("rank 0's plan is malformed");
      batch.push_back(p);
    }
  }
  if (at != bytes.size()) throw std::runtime_error("rank 0's plan is malformed");
  return out;
}

struct Staged {
  std::vector<std::string> files;  // names in the run's directory
  int64_t computed = 0;
  int64_t bytes = 0;
};

// Computes this rank's share of the batches (batch j when j % world == rank) and writes its
// records into record files in run_dir.
Staged compute_share(SplitBuild& b, const BuildOptions& o,
                     const std::vector<std::vector<int64_t>>& batches, int rank, int world,
                     const fs::path& run_dir) {
  std::vector<const std::vector<int64_t>*> mine;
  int64_t samples = 0;
  for (size_t j = static_cast<size_t>(rank); j < batches.size(); j += static_cast<size_t>(world)) {
    mine.push_back(&batches[j]);
    samples += static_cast<int64_t>(batches[j].size());
  }
  Staged staged;
  Progress progress("build " + o.data.split + " (rank " + std::to_string(rank) + ")", samples,
                    o.progress);
  std::vector<std::pair<Key, std::string>> pending;
  int64_t pending_bytes = 0;
  auto spill = [&] {
    if (pending.empty()) return;
    std::sort(pending.begin(), pending.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    check_free_space(o.cache_dir, static_cast<uint64_t>(pending_bytes));
    const std::string name =
        "r" + std::to_string(rank) + "-" + std::to_string(staged.files.size()) + ".sst";
    std::unique_ptr<RecordFileWriter> writer;
    StoreOptions so;
    so.compression = o.compression;
    RecordFileWriter::open((run_dir / name).string(), so, &writer).throw_if_error();
    for (const auto& [key, record] : pending) writer->add(key, record).throw_if_error();
    writer->finish().throw_if_error();
    staged.files.push_back(name);
    pending.clear();
    pending_bytes = 0;
  };
  for (const std::vector<int64_t>* batch : mine) {
    BuildChunk chunk;
    b.plan().from_items(*batch, &chunk.compute_pos, &chunk.compute_keys, &chunk.compute_views);
    b.compute(&chunk);
    for (size_t r = 0; r < chunk.records.size(); ++r) {
      pending_bytes += static_cast<int64_t>(chunk.records[r].size());
      staged.bytes += static_cast<int64_t>(chunk.records[r].size());
      pending.emplace_back(chunk.compute_keys[r], std::move(chunk.records[r]));
    }
    staged.computed += static_cast<int64_t>(chunk.records.size());
    if (pending_bytes >= o.stage_file_bytes) spill();
    progress.advance(static_cast<int64_t>(chunk.compute_pos.size()));
  }
  spill();
  progress.finish();
  return staged;
}

json staged_json(const Staged& st) {
  return {{"files", st.files}, {"computed", st.computed}, {"bytes", st.bytes}};
}

std::string new_run_id() {
  std::random_device rd;
  const uint64_t v =
      (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return Key{v, 0}.to_hex().substr(0, 16);
}

// The run's staging directory, removed with whatever is in it when the run ends (rank 0).
struct RunDir {
  fs::path path;
  ~RunDir() {
    if (path.empty()) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

BuildReport lead(const BuildOptions& options, BuildGroup& g) {
  const int world = g.world();
  SplitBuild b(options);
  b.key_samples();
  check_rank_inputs(rank_inputs(b, options, false), g);
  b.open();
  RunDir run;  // destroyed before b: the staging files go while this process holds the cache
  if (b.plan().unchanged()) {
    g.set(board("plan"), json{{"unchanged", true}}.dump());
  } else {
    b.begin();
    const std::vector<std::vector<int64_t>> batches = b.plan_batches();
    int64_t to_compute = 0;
    for (const auto& b : batches) to_compute += static_cast<int64_t>(b.size());
    const std::string id = new_run_id();
    run.path = fs::path(b.staging_dir()) / ("run-" + id);
    std::error_code ec;
    fs::create_directories(run.path, ec);
    if (ec) throw std::runtime_error("cannot create " + run.path.string() + ": " + ec.message());
    g.set(board("batches"), encode_batches(batches));
    g.set(board("plan"), json{{"unchanged", false}, {"run", id}, {"compute", to_compute}}.dump());
    std::vector<std::string> files;
    int64_t computed = 0, bytes = 0;
    const Staged own = compute_share(b, options, batches, 0, world, run.path);
    for (int r = 0; r < world; ++r) {
      const json done =
          r == 0 ? staged_json(own) : json::parse(g.wait(board("done", r), r), nullptr, false);
      if (!done.is_object() || !done.contains("files") || !done["files"].is_array()) {
        throw std::runtime_error("rank " + std::to_string(r) + " reported its files malformed");
      }
      for (const auto& name : done["files"]) {
        const fs::path file = run.path / name.get<std::string>();
        if (!fs::exists(file, ec)) {
          throw std::runtime_error("rank " + std::to_string(r) + "'s record file " + file.string() +
                                   " is not there");
        }
        files.push_back(file.string());
      }
      computed += done.value("computed", int64_t{0});
      bytes += done.value("bytes", int64_t{0});
    }
    b.ingest_and_index(files, computed, bytes);
    b.finish();
  }
  BuildReport report = b.report();
  report.ranks = world;
  g.set(board("final"), report.to_json());
  for (int r = 1; r < world; ++r) g.wait(board("ack", r), r);
  return report;
}

BuildReport follow(const BuildOptions& options, BuildGroup& g) {
  const int rank = g.rank();
  SplitBuild b(options);
  b.key_samples();
  set_rank_inputs(rank_inputs(b, options, false), g);
  const json plan = json::parse(g.wait(board("plan"), 0), nullptr, false);
  if (!plan.is_object()) throw std::runtime_error("rank 0's plan is malformed");
  if (!plan.value("unchanged", false)) {
    std::string real;
    resolve_cache_path(options.cache_dir, &real).throw_if_error();
    const fs::path run_dir =
        fs::path(real) / kStagingDirName / ("run-" + plan.value("run", std::string()));
    std::error_code ec;
    if (!fs::is_directory(run_dir, ec)) {
      throw std::runtime_error("rank " + std::to_string(rank) +
                               " does not see rank 0's staging directory " + run_dir.string() +
                               ": a build across machines needs the cache on a shared file "
                               "system, at the same --cache path on every machine");
    }
    const std::vector<std::vector<int64_t>> batches =
        decode_batches(g.wait(board("batches"), 0), static_cast<int64_t>(b.plan().keys().size()) *
                                                        std::max<int64_t>(1, b.views()));
    const Staged own = compute_share(b, options, batches, rank, g.world(), run_dir);
    g.set(board("done", rank), staged_json(own).dump());
  }
  const BuildReport report = report_from_json(g.wait(board("final"), 0), "rank 0's report");
  g.set(board("ack", rank), "1");
  return report;
}

}  // namespace

BuildReport run_distributed_build(const BuildOptions& options, BuildGroup& group) {
  return run_as_rank(group, [&] {
    return group.rank() == 0 ? lead(options, group) : follow(options, group);
  });
}

}  // namespace recycle
