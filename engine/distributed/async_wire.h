// The wire protocol of asynchronous training (async_sgd.h): the request and reply headers that a
// worker and a parameter server exchange, their tags, and the helpers both sides share.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/distributed/async_sgd.h"
#include "engine/distributed/work_queue.h"

namespace c10d {
class Work;
}

namespace recycle::async_sgd {

// Point-to-point tags of the parameter server's messages (Gloo keeps them apart from the
// collectives' slots).
constexpr int kRequestTag = 0x5a01;
constexpr int kPayloadTag = 0x5a02;
constexpr int kReplyTag = 0x5a03;
constexpr int kParamsTag = 0x5a04;
constexpr int64_t kHeader = 16;  // int64 words of a request or reply header

enum : int64_t { kExchange = 1, kBye = 2 };
enum : int64_t { kMore = 0, kExhausted = 1, kStopped = 2 };

// A worker's message to a server.
struct Request {
  int64_t kind = kExchange;
  int64_t push_steps = 0;    // local steps the pushed gradient averages (0: no push)
  int64_t payload = 0;       // bytes of the push
  int64_t fetch = 0;         // 1: send the parameters back
  int64_t stale_after = -1;  // send them anyway when the version is above this
  int64_t done_chunk = -1;   // rank 0's server: the chunk this push finishes
  int64_t want = 0;          // rank 0's server: chunks to deal
  double loss_sum = 0;       // of the finished chunk
  int64_t correct = 0;
  WorkerTotals totals;       // with kBye: what the worker did

  at::Tensor pack() const;
  static Request unpack(const at::Tensor& t);
};

// A server's answer.
struct Reply {
  int64_t version = 0;  // the shard's version after the push
  int64_t status = kMore;
  int64_t params = 0;   // 1: the parameters follow, fp32 (2 from a server of another rank:
                        // param_bytes bytes of FetchEncoder's)
  int64_t param_bytes = 0;
  std::vector<Chunk> chunks;  // at most 2

  at::Tensor pack() const;
  static Reply unpack(const at::Tensor& t);
};

// Blocks until `work` (a send or a recv) is done; throws what it failed with.
void wait(const c10::intrusive_ptr<c10d::Work>& work);

// How long a server thread waits for its worker: for ever, in effect. A Gloo wait that times
// out closes every pair of the group, not only the silent worker's; a silent worker is found by
// its heartbeat instead (Server::watch), and its thread's wait aborted.
constexpr std::chrono::milliseconds kForever(int64_t{30} * 24 * 3600 * 1000);

// The store key a server sets for a worker it dropped for silence (the worker reads it when its
// exchanges fail, to say so).
std::string dropped_key(int rank);

}  // namespace recycle::async_sgd
