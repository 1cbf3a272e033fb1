// The packing and unpacking of async_wire.h's request and reply headers, and the helpers both
// sides share.
#include "engine/distributed/async_wire.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace recycle::async_sgd {

namespace {

int64_t double_bits(double d) {
  int64_t i = 0;
  std::memcpy(&i, &d, sizeof(d));
  return i;
}

double bits_double(int64_t i) {
  double d = 0;
  std::memcpy(&d, &i, sizeof(d));
  return d;
}

}  // namespace

torch::Tensor Request::pack() const {
  torch::Tensor t = torch::zeros({kHeader}, torch::kLong);
  int64_t* w = t.data_ptr<int64_t>();
  const int64_t words[] = {kind,          push_steps,      payload,          fetch,
                           stale_after,   done_chunk,      want,             double_bits(loss_sum),
                           correct,       totals.steps,    totals.samples,   totals.link_bytes};
  std::copy(std::begin(words), std::end(words), w);
  return t;
}

Request Request::unpack(const torch::Tensor& t) {
  const int64_t* w = t.data_ptr<int64_t>();
  Request r;
  r.kind = w[0];
  r.push_steps = w[1];
  r.payload = w[2];
  r.fetch = w[3];
  r.stale_after = w[4];
  r.done_chunk = w[5];
  r.want = w[6];
  r.loss_sum = bits_double(w[7]);
  r.correct = w[8];
  r.totals = WorkerTotals{-1, w[9], w[10], w[11]};
  return r;
}

torch::Tensor Reply::pack() const {
  torch::Tensor t = torch::zeros({kHeader}, torch::kLong);
  int64_t* w = t.data_ptr<int64_t>();
  w[0] = version;
  w[1] = status;
  w[2] = params;
  w[3] = static_cast<int64_t>(chunks.size());
  for (size_t i = 0; i < chunks.size() && i < 2; ++i) {
    w[4 + 4 * i] = chunks[i].id;
    w[5 + 4 * i] = chunks[i].epoch;
    w[6 + 4 * i] = chunks[i].start;
    w[7 + 4 * i] = chunks[i].count;
  }
  w[12] = param_bytes;
  return t;
}

Reply Reply::unpack(const torch::Tensor& t) {
  const int64_t* w = t.data_ptr<int64_t>();
  Reply r;
  r.version = w[0];
  r.status = w[1];
  r.params = w[2];
  r.param_bytes = w[12];
  for (int64_t i = 0; i < std::min<int64_t>(w[3], 2); ++i) {
    r.chunks.push_back(Chunk{w[4 + 4 * i], w[5 + 4 * i], w[6 + 4 * i], w[7 + 4 * i]});
  }
  return r;
}

void wait(const c10::intrusive_ptr<c10d::Work>& work) { work->wait(); }

std::string dropped_key(int rank) { return "recycle/async/dropped/" + std::to_string(rank); }

}  // namespace recycle::async_sgd
