// usable_device (engine/models/device.h): --device as this process can use it, or one line.
#include <gtest/gtest.h>

#include <torch/cuda.h>
#include <torch/torch.h>

#include <string>

#include "engine/models/device.h"
#include "engine/models/device_streams.h"
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
    EXPECT_EQ(refusal(name), "--device " + std::string(name) + ": expected cpu, cuda or cuda:N")
        << name;
  }
  // What was typed is named on one line, a control character written as its escape.
  EXPECT_EQ(refusal("cpu\ncpu"), "--device cpu\\ncpu: expected cpu, cuda or cuda:N");
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

namespace {

// engine/models/device_streams.h on the CPU: one stream, events done at once, no timing.
TEST(DeviceStreams, DoNothingOnTheCpu) {
  const c10::Device cpu(c10::kCPU);
  EXPECT_EQ(recycle::side_stream(cpu), recycle::current_stream(cpu));
  recycle::StreamScope scope(recycle::side_stream(cpu));
  recycle::DeviceEvent start(cpu, /*timing=*/true), end(cpu, /*timing=*/true);
  start.record(recycle::current_stream(cpu));
  end.record(recycle::current_stream(cpu));
  end.block(recycle::current_stream(cpu));
  end.synchronize();
  EXPECT_TRUE(end.done());
  EXPECT_LT(end.seconds_since(start), 0.0);
  recycle::keep_until_done(torch::ones({3}), recycle::current_stream(cpu));
}

// On a GPU: the side stream is not the current one; a copy queued there and awaited through
// its event by the current stream gives the values to the current stream's work, and timed
// events give a duration.
TEST(GpuStreams, ACopyOnTheSideStreamReachesTheCurrentStreamThroughItsEvent) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU is usable here";
  const c10::Device gpu(c10::kCUDA, 0);
  const c10::Stream side = recycle::side_stream(gpu), current = recycle::current_stream(gpu);
  EXPECT_NE(side, current);
  const torch::Tensor host = torch::arange(1 << 20, torch::dtype(torch::kFloat32)).pin_memory();
  recycle::DeviceEvent begun(gpu, true), copied(gpu, true);
  torch::Tensor on_gpu;
  {
    recycle::StreamScope scope(side);
    EXPECT_EQ(recycle::current_stream(gpu), side);
    begun.record(side);
    on_gpu = host.to(gpu, /*non_blocking=*/true);
    copied.record(side);
  }
  EXPECT_EQ(recycle::current_stream(gpu), current);
  copied.block(current);
  recycle::keep_until_done(on_gpu, current);
  const double sum = on_gpu.sum(torch::kFloat64).item<double>();
  EXPECT_DOUBLE_EQ(sum, (double(1 << 20) - 1) * double(1 << 20) / 2);
  copied.synchronize();
  EXPECT_TRUE(copied.done());
  EXPECT_GE(copied.seconds_since(begun), 0.0);
}

}  // namespace
