// The build job behind recycle-build (run_build with DistOptions, include/recycle/build.h): one
// process, or one rank of a distributed build whose ranks meet through the job's c10d store
// (DistContext). See engine/precompute/distributed_build.cc for who reads, computes and writes
// what.
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/dist_context.h"
#include "engine/distributed/dist_options.h"  // path_for_rank
#include "engine/distributed/launcher.h"  // launcher_reported_failure
#include "engine/precompute/build_group.h"
#include "engine/precompute/build_pipeline.h"  // run_distributed_build
#include "recycle/build.h"

namespace recycle {

namespace {

// The first failure reported by any rank, and the counter that makes it the first.
const char* const kFailureKey = "recycle/build/failure";
const char* const kFailureCountKey = "recycle/build/failures";

std::string first_line(std::string s) {
  const size_t nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  return s;
}

// BuildGroup on the job's c10d store (a TCPStore, or the launcher's FileStore). A wait polls the
// store for its key and for a failure, and watches the heartbeat of the rank it waits for
// (DistContext rewrites recycle/hb/R every second): a rank whose heartbeat stands still for the
// timeout is lost. In a local job (--nproc) the launcher's word that a rank died ends the wait
// at the next look, half a second at most after the launcher saw it.
class StoreBuildGroup : public BuildGroup {
 public:
  explicit StoreBuildGroup(DistContext& ctx) : ctx_(ctx) {}

  int rank() const override { return ctx_.rank(); }
  int world() const override { return ctx_.world(); }

  void set(const std::string& key, const std::string& value) override {
    guard([&] { ctx_.store().set(key, std::vector<uint8_t>(value.begin(), value.end())); });
  }

  std::string wait(const std::string& key, int from) override {
    using Clock = std::chrono::steady_clock;
    const auto timeout = std::chrono::seconds(std::max(1, ctx_.options().timeout_seconds));
    const std::string beat_key = heartbeat_key(from);
    std::string beat;
    auto beat_changed = Clock::now();
    auto next_look = Clock::now();
    std::string value;
    for (;;) {
      bool found = false;
      guard([&] {
        c10d::Store& store = ctx_.store();
        if (store.check({key})) {
          const std::vector<uint8_t> v = store.get(key);
          value.assign(v.begin(), v.end());
          found = true;
        } else if (store.check({kFailureKey})) {
          const std::vector<uint8_t> v = store.get(kFailureKey);
          throw std::runtime_error(std::string(v.begin(), v.end()));
        } else if (Clock::now() >= next_look) {
          next_look = Clock::now() + std::chrono::milliseconds(500);
          const std::string died = launcher_reported_failure(ctx_.options().master);
          if (!died.empty()) {
            throw std::runtime_error("lost " + died + " (its launcher saw it end)");
          }
          std::string now_beat;
          if (store.check({beat_key})) {
            const std::vector<uint8_t> v = store.get(beat_key);
            now_beat.assign(v.begin(), v.end());
          }
          if (now_beat != beat) {
            beat = now_beat;
            beat_changed = Clock::now();
          } else if (Clock::now() - beat_changed > timeout) {
            throw std::runtime_error(
                "lost rank " + std::to_string(from) + " of " + std::to_string(world()) +
                " (no heartbeat for " + std::to_string(ctx_.options().timeout_seconds) +
                " s: it died, hangs or cannot reach the store at " + ctx_.options().master + ")");
          }
        }
      });
      if (found) return value;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void fail(const std::string& line) noexcept override {
    try {
      c10d::Store& store = ctx_.store();
      if (store.add(kFailureCountKey, 1) == 1) {
        store.set(kFailureKey, std::vector<uint8_t>(line.begin(), line.end()));
      }
    } catch (...) {
      // The store is gone: the others learn of the failure by its heartbeat or their own.
    }
  }

 private:
  // Runs a store operation; c10d's errors (the store's process ended, a timeout) become one
  // line naming the store.
  template <typename F>
  void guard(F&& f) {
    try {
      f();
    } catch (const c10::Error& e) {
      throw std::runtime_error("the job's store at " + ctx_.options().master +
                               " stopped answering (did rank 0 or the launcher end?): " +
                               first_line(e.what_without_backtrace()));
    }
  }

  DistContext& ctx_;
};

}  // namespace

BuildReport run_build(const BuildOptions& options, const DistOptions& dist) {
  // --sharded: this rank's own cache ("{rank}" in --cache names it on a machine of several);
  // alone, one shard is the whole split.
  BuildOptions o = options;
  if (dist.sharded) o.cache_dir = path_for_rank(o.cache_dir, dist.rank);
  if (!dist.distributed()) return run_build(o);
  DistContext ctx(dist);
  StoreBuildGroup group(ctx);
  return dist.sharded ? run_sharded_build(o, group) : run_distributed_build(o, group);
}

}  // namespace recycle
