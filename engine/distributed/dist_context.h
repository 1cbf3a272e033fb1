// DistContext: this process's place in a data-parallel job. It joins the job's c10d store (a
// TCPStore, or a FileStore for the launcher's local jobs), meets the other ranks there (the
// rendezvous: the job token, one process per rank, the options every rank must give alike),
// makes the Gloo process group, and keeps a heartbeat in the store so that a failure can name
// the rank that was lost. Thread safe except where noted.
//
// The store holds, besides what Gloo puts there:
//   recycle/join/R    how many processes joined as rank R (an atomic add: 2 = "joined twice")
//   recycle/nonce     rank 0's random nonce for this job
//   recycle/auth/R    rank R's keyed digest of (nonce, R) under the job token
//   recycle/options/R rank R's options that must agree, "FLAG\tVALUE" lines
//   recycle/verdict   rank 0's verdict on the rendezvous: "ok" or the line every rank stops with
//   recycle/verdict/read  how many other ranks have read it (rank 0 waits for them to refuse)
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
#include <vector>

#include "engine/distributed/dist_options.h"

namespace recycle {

// The key of a rank's heartbeat on the job's store ("BEATS STEP", rewritten every second by its
// DistContext): the one spelling, for whoever watches a rank (the build's board too).
std::string heartbeat_key(int rank);

class DistContext {
 public:
  // Joins the job at options.master as options.rank (every rank must call this; it returns once
  // all world_size ranks have met and made the process group) and starts the heartbeat.
  // `must_agree` lists the options every rank must give alike (TrainOptions::flag_values; only
  // entries marked same_on_every_rank are compared; --world-size always is). Before any
  // collective: every rank presents the job's token (RECYCLE_JOB_TOKEN from the environment;
  // required with a TCP --master, std::invalid_argument without one), rank 0 checks the tokens,
  // that no rank joined twice and that the options agree, and every rank stops with the same one
  // line when not. Throws std::invalid_argument for a bad rank, world size or master address,
  // std::runtime_error with one line otherwise (a port in use, a host that does not resolve, a
  // --master that is no job's store, ranks that never came within the timeout, ...). Leaves no
  // thread behind when it throws. `gpu`: the job trains on a GPU, so the group sends CUDA
  // tensors' collectives to NCCL (use_nccl_for_cuda, process_group.h; its refusal, where NCCL
  // cannot be, is an std::invalid_argument before the rendezvous).
  explicit DistContext(const DistOptions& options, const std::vector<FlagValue>& must_agree = {},
                       bool gpu = false);
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

  // Every rank's heartbeat count so far (-1 for a rank that never wrote one). Throws what the
  // store throws.
  std::vector<int64_t> heartbeat_counts();

  // After a collective failed with `error`: one line naming the lost rank(s) when the heartbeats
  // tell (a rank whose heartbeat stopped, else the rank furthest behind), with `error` after it.
  // Takes a few seconds (it watches the heartbeats for two periods). Does not throw.
  std::string explain_failure(const std::string& error);

 private:
  // The thread that rewrites this rank's heartbeat. Its destructor stops and joins it, so that
  // a constructor that throws after starting it leaves nothing running.
  struct HeartbeatThread {
    std::atomic<bool>* stop = nullptr;
    std::thread thread;
    ~HeartbeatThread() { join(); }
    void join() {
      if (!thread.joinable()) return;
      *stop = true;
      thread.join();
    }
  };

  void open_store(const MasterAddress& address);
  void rendezvous(const std::vector<FlagValue>& must_agree);
  void heartbeat_loop();
  void check_same_now(const std::string& what, const std::string& value);

  DistOptions options_;
  int rank_ = 0;
  int world_ = 1;
  std::string device_host_;  // the address this rank's Gloo pairs listen on
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> stop_{false};
  HeartbeatThread heartbeat_;  // last: stopped before the store and group go
};

}  // namespace recycle
