// engine/precompute/prefix_runner.h: the frozen prefix on its device, outputs on the CPU.
#include "engine/precompute/prefix_runner.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "engine/models/weights_io.h"

namespace recycle {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void PrefixRunner::use_model(PreparedModel model, bool fold) {
  prepared_.emplace(std::move(model));
  fast_.reset();
  if (fold) fast_.emplace(prepared_->model, prepared_->split.prefix_blocks);
}

void PrefixRunner::use_blocks(const BlockModel& blocks, std::string head_blob) {
  prepared_.reset();
  fast_.emplace(blocks, blocks.num_blocks());
  head_blob_ = std::move(head_blob);
}

PreparedModel& PrefixRunner::model() {
  if (!prepared_) throw std::logic_error("PrefixRunner: the blocks of another cache have no model");
  return *prepared_;
}

std::string PrefixRunner::head_bytes() const {
  return prepared_ ? module_to_bytes(*prepared_->split.head) : head_blob_;
}

torch::Tensor PrefixRunner::run(const torch::Tensor& inputs) {
  const auto started = std::chrono::steady_clock::now();
  torch::Tensor out;
  if (fast_) {
    out = fast_->forward(inputs);
  } else {
    if (!prepared_) throw std::logic_error("PrefixRunner::run: no prefix to run");
    c10::InferenceMode inference;
    out = prepared_->split.prefix->forward(inputs);
  }
  if (out.is_cuda()) {
    // Page-locked memory: the copy goes by DMA at the bus's rate, and waits for the forward.
    torch::Tensor host = torch::empty(out.sizes(), torch::dtype(torch::kFloat32).pinned_memory(true));
    host.copy_(out);
    out = host;
  } else {
    out = out.to(torch::kFloat32).contiguous();
  }
  last_seconds_ = seconds_since(started);
  return out;
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
