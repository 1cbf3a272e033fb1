// The "fp16" hook: each rank's gradients divided by the world size, cast to half, summed by an
// fp16 allreduce (Gloo sums float16 on the CPU), cast back to float. Half the bytes of "none".
// Dividing before the cast (as PyTorch's fp16_compress_hook does) keeps the sum of world values
// inside half's range (65504); the price is that values below half's smallest subnormal
// (6e-8) times the world size become 0. Stateless: reduce() may be called from any one thread
// at a time.
#include <string>
#include <vector>

#include "engine/distributed/comm_hook.h"

namespace recycle {

namespace {

class Fp16Hook final : public CommHook {
 public:
  explicit Fp16Hook(c10::intrusive_ptr<c10d::ProcessGroup> group) : group_(std::move(group)) {}
  std::string name() const override { return "fp16"; }
  void reduce(int64_t, torch::Tensor& grad) override {
    std::vector<torch::Tensor> tensors{grad.div(group_->getSize()).to(torch::kHalf)};
    group_->allreduce(tensors)->wait();
    grad.copy_(tensors[0]);
    count(grad.numel() * 2, grad.numel() * static_cast<int64_t>(sizeof(float)));
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

}  // namespace

std::unique_ptr<CommHook> make_fp16_hook(c10::intrusive_ptr<c10d::ProcessGroup> group) {
  return std::make_unique<Fp16Hook>(std::move(group));
}

}  // namespace recycle
