#include "engine/train/prefetch.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/util/cores.h"

namespace recycle {

int64_t prefetch_depth(int64_t requested) {
  if (requested >= 0) return requested;
  const int64_t cores = usable_cores();
  return cores > at::get_num_threads() ? 2 : 0;
}

std::unique_ptr<PrefetchedBatches> load_ahead(CachedBatches& cached, int64_t requested) {
  // A GPU's step leaves the CPU's cores to the loader: load ahead unless told not to.
  const int64_t depth = requested == kAutoPrefetch && !cached.device().is_cpu()
                            ? 2
                            : prefetch_depth(requested);
  if (depth > 0) return std::make_unique<PrefetchedBatches>(cached, depth, cached.device());
  cached.set_load_threads(at::get_num_threads());
  return nullptr;
}

PrefetchedBatches::PrefetchedBatches(BatchSource& inner, int64_t depth, c10::Device device)
    : inner_(inner), depth_(depth), device_(device) {
  if (depth < 1) {
    throw std::invalid_argument("prefetch depth must be at least 1, not " + std::to_string(depth));
  }
  thread_ = std::thread([this] { run(); });
}

PrefetchedBatches::~PrefetchedBatches() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // spent_ and the rest are dropped here, on the owner's thread.
}

namespace {

// Moves the tensors of `batch` that anything else refers to (a tensor handed out and kept, a
// view of it) into `spent`, leaving them undefined in the batch (decoded into anew).
void move_shared(Batch* batch, std::vector<torch::Tensor>* spent) {
  auto take = [&](torch::Tensor& t) {
    if (t.defined() && (t.use_count() != 1 || t.storage().use_count() != 1)) {
      spent->push_back(std::move(t));
      t = torch::Tensor();
    }
  };
  for (auto& input : batch->inputs) take(input.second);
  take(batch->labels);
}

}  // namespace

std::vector<torch::Tensor> PrefetchedBatches::take_spent() {
  std::vector<torch::Tensor> spent;
  spent.swap(spent_);
  return spent;
}

int64_t PrefetchedBatches::batches() const {
  const int64_t n = static_cast<int64_t>(order_.size());
  return batch_ > 0 ? (n + batch_ - 1) / batch_ : 0;
}

void PrefetchedBatches::run() {
  // This thread's copies to a GPU go on a stream of their own (a CPU: nothing changes).
  const StreamScope on_side(side_stream(device_));
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] {
      return stop_ || (planned_ && !failed_ && next_load_ < batches() &&
                       static_cast<int64_t>(ready_.size()) < depth_);
    });
    if (stop_) return;
    const uint64_t gen = generation_;
    const int64_t pos = next_load_ * batch_;
    const int64_t n = std::min<int64_t>(batch_, static_cast<int64_t>(order_.size()) - pos);
    ++next_load_;
    Slot slot;
    if (!free_.empty()) {
      slot.batch = std::move(free_.back());
      free_.pop_back();
      // The caller's tensors that are still referred to are the caller's thread's to drop.
      move_shared(&slot.batch, &spent_);
    }
    busy_ = true;
    // order_ is not changed while busy_ (plan and cancel wait for the thread to be idle).
    const int64_t* indices = order_.data() + pos;
    lock.unlock();
    try {
      inner_.load(indices, n, &slot.batch);
      if (!device_.is_cpu()) {
        slot.copied.emplace(device_);
        slot.copied->record(current_stream(device_));
      }
    } catch (...) {
      slot.error = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (gen == generation_) {
      if (slot.error) failed_ = true;
      ready_.push_back(std::move(slot));
    } else if (!slot.error && static_cast<int64_t>(free_.size()) <= depth_) {
      free_.push_back(std::move(slot.batch));
    }
    cv_.notify_all();
  }
}

void PrefetchedBatches::cancel(std::unique_lock<std::mutex>& lock) {
  ++generation_;
  planned_ = false;
  failed_ = false;
  for (Slot& s : ready_) {
    if (!s.error && static_cast<int64_t>(free_.size()) <= depth_) {
      free_.push_back(std::move(s.batch));
    }
  }
  ready_.clear();
  cv_.wait(lock, [&] { return !busy_; });
}

void PrefetchedBatches::plan(const std::vector<int64_t>& order, int64_t batch) {
  std::vector<torch::Tensor> spent;  // dropped on return, after the lock (declared before it)
  std::unique_lock<std::mutex> lock(mu_);
  spent = take_spent();
  // The plan under way, none of it taken yet (the trainer plans the next epoch during the
  // last step of this one, then again when it starts): keep what it loaded ahead.
  if (planned_ && !failed_ && next_take_ == 0 && batch == batch_ && order == order_) return;
  cancel(lock);
  if (batch < 1 || order.empty()) return;
  order_ = order;
  batch_ = batch;
  next_load_ = 0;
  next_take_ = 0;
  planned_ = true;
  lock.unlock();
  cv_.notify_all();
}

void PrefetchedBatches::load(const int64_t* indices, int64_t n, Batch* out) {
  std::vector<torch::Tensor> spent;  // dropped on return, after the lock (declared before it)
  std::unique_lock<std::mutex> lock(mu_);
  spent = take_spent();
  const int64_t pos = next_take_ * batch_;
  const bool follows =
      planned_ && next_take_ < batches() &&
      n == std::min<int64_t>(batch_, static_cast<int64_t>(order_.size()) - pos) &&
      (indices == order_.data() + pos ||
       std::memcmp(indices, order_.data() + pos, static_cast<size_t>(n) * sizeof(int64_t)) == 0);
  if (!follows) {
    // Served here, in the order asked; the thread is idle and stays so until the next plan.
    cancel(lock);
    lock.unlock();
    inner_.load(indices, n, out);
    return;
  }
  cv_.wait(lock, [&] { return !ready_.empty(); });
  Slot slot = std::move(ready_.front());
  ready_.pop_front();
  ++next_take_;
  if (slot.error) {
    // The thread loads no further in this plan (failed_); a later load starts over.
    cancel(lock);
    std::rethrow_exception(slot.error);
  }
  std::swap(*out, slot.batch);
  if (slot.copied) {
    // The caller's kernels wait for the copies; the memory, made on the loading thread's
    // stream, is not handed out again before the caller's work on it is done.
    const c10::Stream stream = current_stream(device_);
    slot.copied->block(stream);
    for (const auto& input : out->inputs) keep_until_done(input.second, stream);
    keep_until_done(out->labels, stream);
  }
  // The caller's previous tensors are loaded into again once nothing else refers to them.
  if (static_cast<int64_t>(free_.size()) <= depth_) free_.push_back(std::move(slot.batch));
  ++prefetched_;
  lock.unlock();
  cv_.notify_all();
}

}  // namespace recycle
