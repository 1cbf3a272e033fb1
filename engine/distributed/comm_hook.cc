#include "engine/distributed/comm_hook.h"

#include <stdexcept>
#include <vector>

#include "engine/distributed/adacomp_hook.h"

namespace recycle {

namespace {

// fp32 allreduce, then divide by the world size: what DDP does without a hook.
class AllreduceHook final : public CommHook {
 public:
  explicit AllreduceHook(c10::intrusive_ptr<c10d::ProcessGroup> group) : group_(std::move(group)) {}
  std::string name() const override { return "none"; }
  void reduce(int64_t, torch::Tensor& grad) override {
    std::vector<torch::Tensor> tensors{grad};
    group_->allreduce(tensors)->wait();
    grad.div_(group_->getSize());
    const int64_t bytes = grad.numel() * static_cast<int64_t>(sizeof(float));
    count(bytes, bytes);
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

}  // namespace

std::unique_ptr<CommHook> make_comm_hook(GradCompression compression,
                                         c10::intrusive_ptr<c10d::ProcessGroup> group) {
  switch (compression) {
    case GradCompression::kNone:
      return std::make_unique<AllreduceHook>(std::move(group));
    case GradCompression::kFp16:
      return make_fp16_hook(std::move(group));
    case GradCompression::kTopk:
      return make_adacomp_hook(std::move(group));
  }
  // Not one of the enum's values: grad_compression_name names the problem.
  throw std::invalid_argument(grad_compression_name(compression));
}

}  // namespace recycle
