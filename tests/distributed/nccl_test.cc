// NCCL for CUDA tensors (engine/distributed/process_group.h, use_nccl_for_cuda): refused in one
// line where it cannot be (here: no GPU, and Debian's LibTorch has no NCCL); on a GPU
// (GpuNccl.*, run by scripts/device_check.sh, skipped on these CI machines) a group sends CUDA
// tensors to NCCL and CPU tensors to Gloo. One GPU holds one NCCL rank, so the GPU test is a
// group of one: it shows the dispatch, not the traffic between GPUs.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/distributed/process_group.h"
#include "tests/test_util.h"

namespace {

TEST(Nccl, IsRefusedInOneLineWhereItCannotBe) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is usable here";
  const std::string e = recycle::testing::error_of([] { recycle::require_nccl(); });
  EXPECT_NE(e.find("NCCL"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_THROW(recycle::require_nccl(), std::invalid_argument);
}

TEST(GpuNccl, AGroupSendsCudaTensorsToNcclAndCpuTensorsToGloo) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU is usable here";
#if TORCH_VERSION_MAJOR >= 2
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto group = recycle::make_gloo_group(c10::make_intrusive<c10d::PrefixStore>("gloo", store), 0,
                                        1, std::chrono::seconds(30), "127.0.0.1");
  recycle::use_nccl_for_cuda(group, c10::make_intrusive<c10d::PrefixStore>("nccl", store), 0, 1,
                             std::chrono::seconds(30));
  EXPECT_EQ(group->getBackend(c10::DeviceType::CUDA)->getBackendName(), "nccl");
  EXPECT_EQ(group->getBackend(c10::DeviceType::CPU)->getBackendName(), "gloo");
  std::vector<torch::Tensor> gpu = {
      torch::arange(6, torch::dtype(torch::kFloat32).device(torch::kCUDA))};
  group->allreduce(gpu)->wait();
  EXPECT_TRUE(torch::equal(gpu[0].cpu(), torch::arange(6, torch::kFloat32)));
  std::vector<torch::Tensor> cpu = {torch::ones({3})};
  group->allreduce(cpu)->wait();
  EXPECT_TRUE(torch::equal(cpu[0], torch::ones({3})));
#else
  GTEST_SKIP() << "LibTorch 1.x has no NCCL here";
#endif
}

}  // namespace
