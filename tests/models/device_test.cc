// usable_device (engine/models/device.h): --device as this process can use it, or one line.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <string>

#include "engine/models/device.h"
#include "recycle/errors.h"

namespace {

std::string refusal(const std::string& name) {
  try {
    recycle::usable_device(name);
  } catch (const recycle::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(Device, CpuIsUsableAndOtherSpellingsAreRefused) {
  EXPECT_TRUE(recycle::usable_device("cpu").is_cpu());
  for (const char* name : {"tpu", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1234", "CPU", ""}) {
    EXPECT_EQ(refusal(name), "--device " + std::string(name) + ": expected cpu, cuda or cuda:N") << name;
  }
}

// Without a GPU (these CI machines) cuda is refused in one line saying why: a LibTorch without
// CUDA (Debian's) or no GPU visible (pip's, here); with GPUs, cuda:0 is usable and an index past
// them is refused.
TEST(Device, CudaIsUsableOnlyWhereAGpuIs) {
  if (torch::cuda::is_available()) {
    EXPECT_TRUE(recycle::usable_device("cuda").is_cuda());
    EXPECT_EQ(recycle::usable_device("cuda:0").index(), 0);
    const std::string past = "cuda:" + std::to_string(torch::cuda::device_count());
    EXPECT_NE(refusal(past).find("GPU(s): cuda:0 to"), std::string::npos) << refusal(past);
    return;
  }
  for (const char* name : {"cuda", "cuda:0", "cuda:3"}) {
    const std::string why = refusal(name);
    EXPECT_TRUE(why.find("this program's LibTorch has no CUDA") != std::string::npos ||
                why.find("no GPU is usable by this process") != std::string::npos)
        << name << ": " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
}

}  // namespace
