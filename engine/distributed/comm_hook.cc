#include "engine/distributed/comm_hook.h"

#include "engine/distributed/dist_options.h"

#include <stdexcept>
#include <vector>

#include "base/strings.h"
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

std::unique_ptr<CommHook> make_comm_hook(const std::string& name,
                                         c10::intrusive_ptr<c10d::ProcessGroup> group) {
  if (name == "none") return std::make_unique<AllreduceHook>(std::move(group));
  if (name == "fp16") return make_fp16_hook(std::move(group));
  if (name == "topk") return make_adacomp_hook(std::move(group));
  throw std::invalid_argument("unknown --grad-compression '" + name + "' (known: " +
                              join(grad_compression_names(), ", ") + ")");
}

}  // namespace recycle
