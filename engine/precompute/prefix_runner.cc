// engine/precompute/prefix_runner.h: the frozen prefix on its device, outputs on the CPU.
#include "engine/precompute/prefix_runner.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "base/seconds.h"
#include "engine/models/device_streams.h"
#include "engine/models/weights_io.h"

namespace recycle {

void PrefixRunner::use_model(PreparedModel model, bool fold) {
  prepared_.emplace(std::move(model));
  fast_.reset();
  if (fold) fast_.emplace(prepared_->model, prepared_->split.prefix_blocks, folded_layout());
}

void PrefixRunner::use_blocks(const BlockModel& blocks, std::string head_blob) {
  prepared_.reset();
  fast_.emplace(blocks, blocks.num_blocks(), folded_layout());
  head_blob_ = std::move(head_blob);
}

PreparedModel& PrefixRunner::model() {
  if (!prepared_) throw std::logic_error("PrefixRunner: the blocks of another cache have no model");
  return *prepared_;
}

std::string PrefixRunner::head_bytes() const {
  return prepared_ ? module_to_bytes(*prepared_->split.head) : head_blob_;
}

struct PrefixRunner::Pending {
  torch::Tensor outputs;  // on the CPU: done; on a GPU: host, filled once `copied` is done
  torch::Tensor device_outputs;  // a GPU's, kept until the copy that reads them is done
  std::chrono::steady_clock::time_point started;
  double seconds = -1;  // the CPU's run
  std::optional<DeviceEvent> begun, copied;
};

PrefixRunner::PrefixRunner(const std::string& device_name, Precision precision)
    : device_(usable_device(device_name)), precision_(precision) {}

PrefixRunner::~PrefixRunner() {
  // Nothing queued on the device may outlive the memory it reads and writes.
  for (Pending& p : pending_) {
    if (p.copied) p.copied->synchronize();
  }
}

PrefixLayout PrefixRunner::folded_layout() const {
  return precision_ == Precision::kFp32 ? InferencePrefix::kDefaultLayout
                                        : PrefixLayout::kChannelsLast;
}

size_t PrefixRunner::in_flight() const { return pending_.size(); }

void PrefixRunner::start(const torch::Tensor& inputs) {
  Pending p;
  p.started = std::chrono::steady_clock::now();
  const bool gpu = !device_.is_cpu();
  if (gpu) {
    p.begun.emplace(device_, /*timing=*/true);
    p.begun->record(current_stream(device_));
  }
  torch::Tensor out;
  {
    c10::InferenceMode inference;
    AutocastScope autocast(precision_, device_.type());
    if (fast_) {
      out = fast_->forward(inputs);
    } else {
      if (!prepared_) throw std::logic_error("PrefixRunner::start: no prefix to run");
      out = prepared_->split.prefix->forward(inputs);
    }
    out = out.to(torch::kFloat32).contiguous();
  }
  if (!gpu) {
    p.outputs = out;
    p.seconds = seconds_since(p.started);
    pending_.push_back(std::move(p));
    return;
  }
  // The copy back goes on a side stream once the forward is done, so that the next run's
  // forward, queued on the current stream, overlaps it. Page-locked memory: the copy goes by
  // DMA at the bus's rate.
  DeviceEvent computed(device_);
  computed.record(current_stream(device_));
  if (!copy_stream_) copy_stream_ = side_stream(device_);
  p.outputs = torch::empty(out.sizes(), torch::dtype(torch::kFloat32).pinned_memory(true));
  {
    StreamScope on_side(*copy_stream_);
    computed.block(*copy_stream_);
    p.outputs.copy_(out, /*non_blocking=*/true);
    p.copied.emplace(device_, /*timing=*/true);
    p.copied->record(*copy_stream_);
  }
  p.device_outputs = out;
  pending_.push_back(std::move(p));
}

torch::Tensor PrefixRunner::finish() {
  if (pending_.empty()) throw std::logic_error("PrefixRunner::finish: no run was started");
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  if (p.copied) {
    p.copied->synchronize();
    last_seconds_ = p.copied->seconds_since(*p.begun);
    if (last_seconds_ < 0) last_seconds_ = seconds_since(p.started);
  } else {
    last_seconds_ = p.seconds;
  }
  return p.outputs;
}

torch::Tensor PrefixRunner::run(const torch::Tensor& inputs) {
  if (!pending_.empty()) throw std::logic_error("PrefixRunner::run: runs are in flight");
  start(inputs);
  return finish();
}

double PrefixRunner::head_seconds_per_sample(const torch::Tensor& outputs) {
  if (!prepared_ || outputs.dim() < 1 || outputs.size(0) < 1) return -1;
  const int64_t k = std::min<int64_t>(outputs.size(0), 64);
  BlockStack& head = prepared_->split.head;
  const bool training = head->is_training();
  head->eval();  // no batch-norm statistics move: the cache's head blob is this module
  double seconds = -1;
  try {
    c10::InferenceMode inference;
    const torch::Tensor in = outputs.narrow(0, 0, k).to(device_);
    const auto started = std::chrono::steady_clock::now();
    const torch::Tensor logits = head->forward(in);
    (void)logits.sum().item<float>();  // the work done, on any device
    seconds = seconds_since(started) / static_cast<double>(k);
  } catch (const c10::Error&) {
    // A head that does not take the records as they are stored (none of this engine's): no
    // estimate.
  }
  head->train(training);
  return seconds;
}

}  // namespace recycle
