// TrainReport: its JSON (TrainReport::to_json) and the figures the training job fills in
// (fill_report, fill_dist_report, fill_async_report; declared in train_job_parts.h).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "base/stats.h"
#include "engine/distributed/async_sgd.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/dist_context.h"
#include "engine/jobs/train_job_parts.h"

namespace recycle {

namespace {

// Per trainable set: from which epoch (1-based), what travels and how much per step.
nlohmann::json comm_phases_json(const std::vector<CommPhase>& comm_phases,
                                int64_t steps_per_epoch) {
  nlohmann::json phases = nlohmann::json::array();
  for (const CommPhase& p : comm_phases) {
    phases.push_back({{"first_epoch", steps_per_epoch ? p.first_step / steps_per_epoch + 1 : 1},
                      {"steps", p.steps},
                      {"trainable", p.trainable},
                      {"buckets", p.buckets},
                      {"bytes_per_step", p.bytes_per_step()},
                      {"fp32_bytes_per_step", p.fp32_bytes_per_step()}});
  }
  return phases;
}

// The figures of asynchronous training: the servers', and each worker's.
nlohmann::json async_json(const AsyncFigures& async) {
  nlohmann::json workers = nlohmann::json::array();
  for (const AsyncFigures::Worker& w : async.workers) {
    workers.push_back({{"rank", w.rank},
                       {"steps", w.steps},
                       {"samples", w.samples},
                       {"link_bytes", w.link_bytes}});
  }
  return {{"servers", async.servers},
          {"max_staleness", async.max_staleness},
          {"samples", async.samples},
          {"pushes", async.pushes},
          {"fetches", async.fetches},
          {"stale_fetches", async.stale_fetches},
          {"push_bytes_per_step", async.push_bytes_per_step},
          {"fetch_bytes_per_step", async.fetch_bytes_per_step},
          {"server_pushes", async.server_pushes},
          {"link_bytes_per_step", async.link_bytes_per_step},
          {"workers", workers},
          {"lost_workers", async.lost_workers},
          {"epoch_samples", async.epoch_samples}};
}

// The freeze points a progressive run moved (--freeze), each with the level it trained from.
nlohmann::json freezes_json(const std::vector<FreezeEvent>& freezes) {
  nlohmann::json events = nlohmann::json::array();
  for (const FreezeEvent& e : freezes) {
    const LevelInfo& l = e.level;
    events.push_back({{"epoch", e.epoch},
                      {"rule", e.rule},
                      {"measure", e.measure},
                      {"from_blocks", e.from_blocks},
                      {"to_blocks", e.to_blocks},
                      {"blocks", e.blocks},
                      {"trainable_before", e.trainable_before},
                      {"trainable_after", e.trainable_after},
                      {"level", {{"dir", l.dir},
                                 {"prefix_blocks", l.prefix_blocks},
                                 {"split_at", l.split_at},
                                 {"fingerprint", l.fingerprint},
                                 {"source", l.source},
                                 {"reused", l.reused},
                                 {"computed", l.computed},
                                 {"samples", l.samples},
                                 {"seconds", l.seconds}}}});
  }
  return events;
}

}  // namespace

std::string TrainReport::to_json() const {
  const nlohmann::json ratio = recycle >= 0 ? nlohmann::json(recycle) : nlohmann::json(nullptr);
  nlohmann::json j = {{"mode", mode},
                      {"recycle", ratio},
                      {"epochs", epochs},
                      {"resumed_epochs", resumed_epochs},
                      {"resumed_batches", resumed_batches},
                      {"train_samples", train_samples},
                      {"epoch_seconds", epoch_seconds},
                      {"epoch_loss", epoch_loss},
                      {"train_samples_per_s", train_samples_per_s},
                      {"test_samples", test_samples},
                      {"notes", notes},
                      {"precision", precision},
                      {"seconds", seconds},
                      {"world_size", world_size},
                      {"sync", sync},
                      {"grad_compression", grad_compression},
                      {"steps", steps},
                      {"buckets", buckets},
                      {"bytes_per_step", bytes_per_step},
                      {"fp32_bytes_per_step", fp32_bytes_per_step},
                      {"compression_ratio", compression_ratio}};
  j["test_acc"] = test_acc >= 0 ? nlohmann::json(test_acc) : nlohmann::json(nullptr);
  if (!epoch_test_acc.empty()) j["epoch_test_acc"] = epoch_test_acc;
  if (views > 0) j["views"] = views;
  if (mode == "cache") {
    j["memory"] = {{"queue_bytes", memory.queue_bytes},
                   {"preload_bytes", memory.preload_bytes},
                   {"index_bytes", memory.index_bytes},
                   {"block_cache_bytes", memory.block_cache_bytes},
                   {"block_cache_used_bytes", block_cache_used}};
  }
  if (!comm_phases.empty()) {
    j["comm_phases"] = comm_phases_json(comm_phases, epochs > 0 ? steps / epochs : 0);
  }
  if (sync.rfind("async", 0) == 0) j["async"] = async_json(async);
  if (!epoch_sources.empty()) j["epoch_sources"] = epoch_sources;
  if (!freeze.empty()) {
    j["freeze"] = freeze;
    j["level_seconds"] = level_seconds;
    j["freezes"] = freezes_json(freezes);
  }
  return j.dump();
}

void fill_report(TrainReport* report, const std::vector<EpochResult>& epochs) {
  report->epochs = static_cast<int64_t>(epochs.size());
  for (const EpochResult& e : epochs) {
    report->epoch_seconds.push_back(e.seconds);
    report->epoch_loss.push_back(e.loss);
  }
  const double med = median(report->epoch_seconds);
  report->train_samples_per_s = med > 0 ? report->train_samples / med : 0.0;
}

namespace {

// What every data-parallel report says: the world, its sync and its compression.
void fill_world(TrainReport* report, const DistContext& dist, const TrainOptions& o) {
  report->world_size = dist.world();
  report->sync = sync_name(o.dist.sync);
  report->grad_compression = grad_compression_name(o.dist.grad_compression);
}

}  // namespace

void fill_dist_report(TrainReport* report, const DistContext& dist, const TrainOptions& o,
                      const DataParallelStats& s) {
  fill_world(report, dist, o);
  report->steps = s.steps;
  report->buckets = s.buckets;
  report->bytes_per_step = s.bytes_per_step();
  report->fp32_bytes_per_step = s.fp32_bytes_per_step();
  report->compression_ratio = s.compression_ratio();
  report->comm_phases = s.phases;
}

void fill_async_report(TrainReport* report, const DistContext& dist, const TrainOptions& o,
                       const AsyncReport& a) {
  fill_world(report, dist, o);
  report->steps = a.steps;
  report->buckets = a.buckets;
  const double steps = a.steps ? static_cast<double>(a.steps) : 1.0;
  report->bytes_per_step = (a.push_bytes + a.fetch_bytes) / steps;
  report->fp32_bytes_per_step = (a.fp32_push_bytes + a.fp32_fetch_bytes) / steps;
  report->compression_ratio =
      a.push_bytes + a.fetch_bytes ? report->fp32_bytes_per_step / report->bytes_per_step : 0.0;
  AsyncFigures& f = report->async;
  f.servers = std::min(o.dist.servers, dist.world());
  f.max_staleness = o.dist.max_staleness;
  f.samples = a.samples;
  f.pushes = a.pushes;
  f.fetches = a.fetches;
  f.stale_fetches = a.stale_fetches;
  f.push_bytes_per_step = a.push_bytes / steps;
  f.fetch_bytes_per_step = a.fetch_bytes / steps;
  f.server_pushes = a.server_pushes;
  int64_t link_bytes = 0, worker_steps = 0;
  for (const WorkerTotals& w : a.workers) {
    f.workers.push_back({w.rank, w.steps, w.samples, w.link_bytes});
    link_bytes += w.link_bytes;
    worker_steps += w.steps;
  }
  f.link_bytes_per_step = worker_steps ? static_cast<double>(link_bytes) / worker_steps : 0.0;
  f.lost_workers = a.lost_workers;
  for (const EpochResult& e : a.epochs) f.epoch_samples.push_back(e.samples);
  for (size_t i = 0; i < a.lost_workers.size(); ++i) {
    report->notes.push_back("lost worker rank " + std::to_string(a.lost_workers[i]) + " (" +
                            a.lost_reasons[i] + "); the others trained its share");
  }
}

}  // namespace recycle
