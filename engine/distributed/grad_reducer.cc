#include "engine/distributed/grad_reducer.h"

#include <stdexcept>

#include "base/strings.h"

namespace recycle {

GradReducer::GradReducer(std::vector<torch::Tensor> params, std::unique_ptr<CommHook> hook,
                         int64_t bucket_bytes)
    : params_(std::move(params)), slots_(params_.size()), hook_(std::move(hook)) {
  if (params_.empty()) throw std::invalid_argument("no trainable parameters to average");
  // Reverse order: the last layer's gradients are ready first.
  std::vector<int64_t> sizes;  // numel of each bucket
  for (int64_t i = static_cast<int64_t>(params_.size()) - 1; i >= 0; --i) {
    const torch::Tensor& p = params_[i];
    if (p.scalar_type() != torch::kFloat) {
      throw std::invalid_argument("data-parallel training needs float32 parameters");
    }
    const int64_t bytes =
        (sizes.empty() ? 0 : sizes.back() + p.numel()) * static_cast<int64_t>(sizeof(float));
    if (sizes.empty() || (bytes > bucket_bytes && !buckets_.back().params.empty())) {
      buckets_.emplace_back();
      sizes.push_back(0);
    }
    slots_[i] = Slot{static_cast<int64_t>(buckets_.size()) - 1, sizes.back(), false};
    buckets_.back().params.push_back(i);
    sizes.back() += p.numel();
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    buckets_[k].flat = torch::zeros({sizes[k]}, params_.front().options().dtype(torch::kFloat));
    buckets_[k].pending = static_cast<int64_t>(buckets_[k].params.size());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    hook_handles_.push_back(params_[i].register_hook(
        [this, i](const torch::Tensor& grad) { on_grad(static_cast<int64_t>(i), grad); }));
  }
  comm_ = std::thread([this] { comm_loop(); });
}

GradReducer::~GradReducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  comm_.join();
  for (size_t i = 0; i < params_.size(); ++i) params_[i].remove_hook(hook_handles_[i]);
}

std::vector<std::vector<int64_t>> GradReducer::bucket_params() const {
  std::vector<std::vector<int64_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

void GradReducer::on_grad(int64_t param, const torch::Tensor& grad) {
  Slot& s = slots_[param];
  Bucket& b = buckets_[s.bucket];
  torch::NoGradGuard no_grad;
  b.flat.narrow(0, s.offset, grad.numel()).copy_(grad.reshape({-1}));
  if (!s.ready) {
    s.ready = true;
    --b.pending;
  }
  queue_ready_buckets();
}

void GradReducer::queue_ready_buckets() {
  std::lock_guard<std::mutex> lock(mutex_);
  bool added = false;
  while (next_to_queue_ < buckets_.size() && buckets_[next_to_queue_].pending == 0) {
    buckets_[next_to_queue_].queued = true;
    queue_.push_back(static_cast<int64_t>(next_to_queue_++));
    added = true;
  }
  if (added) cv_.notify_all();
}

void GradReducer::comm_loop() {
  for (;;) {
    int64_t index;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      index = queue_.front();
      queue_.pop_front();
    }
    Bucket& b = buckets_[index];
    if (!error_) {
      try {
        hook_->reduce(index, b.flat);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      b.done = true;
    }
    cv_.notify_all();
  }
}

void GradReducer::finish_step() {
  // Parameters that got no gradient this step contribute zeros.
  for (size_t i = 0; i < params_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.ready) continue;
    Bucket& b = buckets_[s.bucket];
    b.flat.narrow(0, s.offset, params_[i].numel()).zero_();
    s.ready = true;
    --b.pending;
  }
  queue_ready_buckets();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] {
      for (const Bucket& b : buckets_) {
        if (!b.done) return false;
      }
      return true;
    });
  }
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const c10::Error& e) {
      throw CommFailure(first_line(e.what_without_backtrace()));
    } catch (const std::exception& e) {
      throw CommFailure(first_line(e.what()));
    }
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Slot& s = slots_[i];
    torch::Tensor avg =
        buckets_[s.bucket].flat.narrow(0, s.offset, params_[i].numel()).view(params_[i].sizes());
    torch::Tensor& g = params_[i].mutable_grad();
    if (g.defined()) {
      g.copy_(avg);
    } else {
      g = avg.clone();
    }
  }
  for (Slot& s : slots_) s.ready = false;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int64_t>(b.params.size());
    b.queued = false;
    b.done = false;
  }
  next_to_queue_ = 0;
}

}  // namespace recycle
