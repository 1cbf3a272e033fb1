// A small scripted model built with LibTorch's TorchScript API (no Python), saved as
// torch.jit.save would: a Sequential-like module whose named children, in order, are
//   conv1, bn1, relu, stage1, stage2, stage3, stage4, pool, fc
// Its forward runs them in that order (or, with `in_order` false, skips relu, so it is not
// its children in order). conv1/bn1/relu are the stem; stageK is composite (conv, bn, ReLU,
// and a residual add when the shape stays); pool is mean over H and W; fc is a linear layer.
// Input [N, in_channels, H, W] -> [N, classes]. Weights drawn from torch's global generator.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace recycle::testing {

// A class name of its own for each scripted module made here: a saved file holds one class per
// name, and modules of one name with other code would clash.
inline torch::jit::Module scripted_module(const std::string& type) {
  static int made = 0;
  torch::jit::Module m(type + "_" + std::to_string(made++));
  m.register_attribute("training", c10::BoolType::get(), true);
  return m;
}

inline torch::jit::Module scripted_conv(int64_t in, int64_t out, int64_t stride) {
  torch::jit::Module m = scripted_module("Conv");
  m.register_parameter("weight", torch::randn({out, in, 3, 3}) * (1.5 / std::sqrt(9.0 * in)),
                       false);
  m.register_parameter("bias", torch::randn({out}) * 0.1, false);
  m.define("def forward(self, x):\n    return torch.conv2d(x, self.weight, self.bias, [" +
           std::to_string(stride) + ", " + std::to_string(stride) + "], [1, 1])\n");
  return m;
}

// Batch norm with running statistics (so eval and train mode differ).
inline torch::jit::Module scripted_bn(int64_t channels) {
  torch::jit::Module m = scripted_module("BatchNorm");
  m.register_parameter("weight", torch::rand({channels}) + 0.5, false);
  m.register_parameter("bias", torch::randn({channels}) * 0.1, false);
  m.register_buffer("running_mean", torch::randn({channels}) * 0.1);
  m.register_buffer("running_var", torch::rand({channels}) + 0.5);
  m.define("def forward(self, x):\n    return torch.batch_norm(x, self.weight, self.bias, "
           "self.running_mean, self.running_var, self.training, 0.1, 1e-5, False)\n");
  return m;
}

inline torch::jit::Module scripted_function(const std::string& type, const std::string& body) {
  torch::jit::Module m = scripted_module(type);
  m.define("def forward(self, x):\n    return " + body + "\n");
  return m;
}

inline torch::jit::Module scripted_stage(int64_t in, int64_t out, int64_t stride) {
  torch::jit::Module m = scripted_module("Stage" + std::to_string(in) + "x" + std::to_string(out));
  m.register_module("conv", scripted_conv(in, out, stride));
  m.register_module("bn", scripted_bn(out));
  const bool residual = in == out && stride == 1;
  m.define(
      std::string(
          "def forward(self, x):\n    y = torch.relu(self.bn.forward(self.conv.forward(x)))\n") +
      (residual ? "    return y + x\n" : "    return y\n"));
  return m;
}

// With a gate (a TorchScript expression of x), the net's first child applies it to the input.
inline torch::jit::Module scripted_net(int64_t in_channels, int64_t classes, bool in_order = true,
                                       const std::string& gate = "") {
  torch::jit::Module net = scripted_module("Net");
  if (!gate.empty()) net.register_module("gate", scripted_function("Gate", gate));
  net.register_module("conv1", scripted_conv(in_channels, 4, 1));
  net.register_module("bn1", scripted_bn(4));
  net.register_module("relu", scripted_function("ReLU", "torch.relu(x)"));
  net.register_module("stage1", scripted_stage(4, 4, 1));
  net.register_module("stage2", scripted_stage(4, 8, 2));
  net.register_module("stage3", scripted_stage(8, 8, 1));
  net.register_module("stage4", scripted_stage(8, 8, 2));
  net.register_module("pool", scripted_function("Pool", "torch.mean(x, [2, 3])"));
  torch::jit::Module fc = scripted_module("Linear");
  fc.register_parameter("weight", torch::randn({classes, 8}) * 0.3, false);
  fc.register_parameter("bias", torch::randn({classes}) * 0.1, false);
  fc.define("def forward(self, x):\n    return torch.matmul(x, self.weight.t()) + self.bias\n");
  net.register_module("fc", fc);
  net.define(std::string("def forward(self, x):\n") +
             (gate.empty() ? "" : "    x = self.gate.forward(x)\n") +
             "    x = self.bn1.forward(self.conv1.forward(x))\n" +
             (in_order ? "    x = self.relu.forward(x)\n" : "") +
             "    x = self.stage2.forward(self.stage1.forward(x))\n"
             "    x = self.stage4.forward(self.stage3.forward(x))\n"
             "    return self.fc.forward(self.pool.forward(x))\n");
  return net;
}

}  // namespace recycle::testing
