// ReadPool: threads that wait on the disk so that the caller does not wait on one read at a
// time. RocksDB's MultiGet reads the blocks it does not find in the block cache one after the
// other (Debian's RocksDB has no io_uring), so a batch of records read cold keeps one request
// in flight: about a quarter of a virtio disk's rate (docs/scale.md). ActivationStore::multi_get
// splits a large batch into parts, each read with its own MultiGet by a thread of the pool, the
// calling thread reading one part too, which keeps as many requests in flight as the pool has
// threads.
//
// Fork-join only: run() returns when every task has run. Safe to call from many threads at
// once (their tasks share the pool's threads). The threads start with the pool and stop with
// it; they hold no store state. In a process forked from the pool's (a DataLoader worker that
// inherited an open store), the threads are not there: run() runs every task on the calling
// thread, and the destructor leaves the parent's threads (and the pool's locks, which they may
// have held at the fork) alone.
#pragma once

#include <functional>

#include "recycle/status.h"

namespace recycle {

// RECYCLE_READ_THREADS, when set, into *threads: a whole number from 1 to 64
// (InvalidArgument naming the value otherwise, *threads left alone). For disks that want more
// reads in flight (NVMe) or fewer.
Status read_threads_from_environment(int* threads);
// RECYCLE_VERIFY_READS, when set, into *verify: "1" verifies RocksDB's own checksums on the
// records' reads too (StoreOptions::verify_read_checksums), "0" not (InvalidArgument naming
// the value otherwise, *verify left alone).
Status verify_reads_from_environment(bool* verify);

class ReadPool {
 public:
  // `threads` >= 1: the calling thread counts as one, so threads - 1 are started.
  explicit ReadPool(int threads);
  ~ReadPool();
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;

  int threads() const;
  // Calls task(0), ..., task(n - 1), on the pool's threads and the calling thread, and returns
  // when all have returned. A task must not throw.
  void run(int n, const std::function<void(int)>& task);

 private:
  struct Job;
  struct State;  // the queue and the threads: on the heap, so a forked child can leave it be
  static void work(State* state);
  // Runs tasks of `job` until none is left to start; true when this call ran its last one.
  static bool drain(Job& job);

  State* state_;
  int owner_ = 0;  // the process that started the threads (getpid)
};

}  // namespace recycle
