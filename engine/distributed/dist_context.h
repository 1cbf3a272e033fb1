// DistContext: this process's place in a data-parallel job. It joins the job's c10d TCPStore
// (the rendezvous), makes the Gloo process group, and keeps a heartbeat in the store so that a
// failure can name the rank that was lost. Thread safe except where noted.
//
// The store holds, besides what Gloo puts there:
//   recycle/hb/R      rank R's heartbeat: "BEATS STEP", rewritten every second by a thread
//   recycle/same/...  values every rank must agree on (check_same)
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "engine/distributed/dist_options.h"

namespace recycle {

class DistContext {
 public:
  // Connects to the store at options.master, makes the process group (every rank must call
  // this; it returns once all world_size ranks have joined) and starts the heartbeat. Throws
  // std::invalid_argument for a bad rank, world size or master address, std::runtime_error
  // when the others do not join within the timeout (naming the ranks that never came).
  explicit DistContext(const DistOptions& options);
  ~DistContext();

  int rank() const { return rank_; }
  int world() const { return world_; }
  const DistOptions& options() const { return options_; }
  c10::intrusive_ptr<c10d::ProcessGroup> group() const { return group_; }
  c10d::Store& store() { return *store_; }

  // Every rank calls this with its own `value` of `what`. Returns when all ranks gave the same;
  // otherwise throws, on every rank, std::runtime_error with one line naming the ranks that
  // differ from rank 0 and both values. `what` is a short noun ("cache identity").
  void check_same(const std::string& what, const std::string& value);

  // Blocks until every rank has reached the same barrier (through the store; timeout applies).
  void barrier(const std::string& name);

  // The step this rank is on, published with the heartbeat (a rank that hangs lags behind).
  void set_step(int64_t step) { step_.store(step); }

  // After a collective failed with `error`: one line naming the lost rank(s) when the heartbeats
  // tell (a rank whose heartbeat stopped, else the rank furthest behind), with `error` after it.
  // Takes a few seconds (it watches the heartbeats for two periods).
  std::string explain_failure(const std::string& error);

 private:
  void heartbeat_loop();
  void check_same_now(const std::string& what, const std::string& value);

  DistOptions options_;
  int rank_ = 0;
  int world_ = 1;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

}  // namespace recycle
