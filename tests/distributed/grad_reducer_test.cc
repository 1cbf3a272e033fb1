// GradReducer: bucketed gradient averaging over an in-process Gloo group.
#include "engine/distributed/grad_reducer.h"

#include <gtest/gtest.h>

#include <mutex>

#include "tests/distributed/gloo_group.h"

namespace recycle {
namespace {

torch::nn::Sequential small_model() {
  // The same start on every rank. The ranks are threads sharing LibTorch's global generator:
  // seeding and drawing must not interleave.
  static std::mutex init_mutex;
  std::lock_guard<std::mutex> lock(init_mutex);
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(6, 5), torch::nn::ReLU(), torch::nn::Linear(5, 3));
}

// Rank r's batch at `step`: its own data.
std::pair<torch::Tensor, torch::Tensor> batch_of(int rank, int step) {
  torch::Generator gen = at::detail::createCPUGenerator(1000 * step + rank);
  return {torch::randn({4, 6}, gen), torch::randint(0, 3, {4}, gen)};
}

std::vector<torch::Tensor> local_grads(torch::nn::Sequential& model, int rank, int step) {
  model->zero_grad();
  auto [x, y] = batch_of(rank, step);
  torch::nn::functional::cross_entropy(model->forward(x), y).backward();
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : model->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

TEST(GradReducer, BucketsInReverseOrderAndAveragesEveryRanksGradients) {
  constexpr int kWorld = 2;
  std::mutex mutex;
  std::vector<std::vector<std::vector<torch::Tensor>>> seen(kWorld);  // [rank][step][param]
  testing::run_gloo_group(kWorld, [&](int rank, c10::intrusive_ptr<c10d::ProcessGroup> group) {
    torch::nn::Sequential model = small_model();
    torch::nn::Sequential reference = small_model();  // no hooks: the expected average
    // 64-byte buckets: the 4 parameters (30, 5, 15, 3 floats) make 4 buckets.
    GradReducer reducer(model->parameters(), make_comm_hook(recycle::GradCompression::kNone, group),
                        64);
    EXPECT_EQ(reducer.buckets(), 4);
    EXPECT_EQ(reducer.bucket_params().front(), std::vector<int64_t>{3});  // last layer's bias first
    for (int step = 0; step < 3; ++step) {
      model->zero_grad();
      auto [x, y] = batch_of(rank, step);
      torch::nn::functional::cross_entropy(model->forward(x), y).backward();
      reducer.finish_step();
      std::vector<torch::Tensor> expected = local_grads(reference, 0, step);
      const std::vector<torch::Tensor> other = local_grads(reference, 1, step);
      for (size_t i = 0; i < expected.size(); ++i) {
        expected[i] = (expected[i] + other[i]) / 2;
        EXPECT_TRUE(torch::allclose(model->parameters()[i].grad(), expected[i], 1e-6, 1e-7))
            << "rank " << rank << " step " << step << " parameter " << i;
      }
      std::vector<torch::Tensor> grads;
      for (const torch::Tensor& p : model->parameters()) grads.push_back(p.grad().clone());
      std::lock_guard<std::mutex> lock(mutex);
      seen[rank].push_back(grads);
    }
    EXPECT_EQ(reducer.hook().bytes_sent(), 3 * (30 + 5 + 15 + 3) * 4);
  });
  for (size_t step = 0; step < seen[0].size(); ++step) {
    for (size_t i = 0; i < seen[0][step].size(); ++i) {
      EXPECT_TRUE(torch::equal(seen[0][step][i], seen[1][step][i]));  // bit-identical on both ranks
    }
  }
}

TEST(GradReducer, AParameterWithoutAGradientContributesZeros) {
  testing::run_gloo_group(2, [&](int rank, c10::intrusive_ptr<c10d::ProcessGroup> group) {
    torch::manual_seed(0);
    torch::nn::Linear used(3, 2), unused(3, 2);
    std::vector<torch::Tensor> params = used->parameters();
    for (const torch::Tensor& p : unused->parameters()) params.push_back(p);
    GradReducer reducer(params, make_comm_hook(recycle::GradCompression::kNone, group), 1 << 20);
    // Rank 1 leaves `used` out of its graph: its gradients count as zeros in the average.
    torch::Tensor x = torch::ones({1, 3});
    torch::Tensor loss = rank == 0 ? used->forward(x).sum() : unused->forward(x).sum();
    loss.backward();
    reducer.finish_step();
    EXPECT_TRUE(torch::allclose(used->weight.grad(), torch::full({2, 3}, 0.5)));
    EXPECT_TRUE(torch::allclose(unused->weight.grad(), torch::full({2, 3}, 0.5)));
  });
}

}  // namespace
}  // namespace recycle
