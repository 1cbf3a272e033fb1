#include "engine/models/split_model.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace recycle {

namespace nn = torch::nn;

int64_t prefix_blocks_for_ratio(const BlockModel& model, double ratio) {
  if (!(ratio >= 0.0 && ratio <= 1.0)) {
    throw std::invalid_argument("recycle ratio must be between 0 and 1, got " +
                                std::to_string(ratio));
  }
  const double exact = ratio * static_cast<double>(model.num_blocks());
  const int64_t blocks = static_cast<int64_t>(std::llround(exact));
  if (std::abs(exact - static_cast<double>(blocks)) > 1e-6) {
    std::ostringstream msg;
    msg << "--recycle " << ratio << " falls between blocks: this model has "
        << model.num_blocks() << " blocks, so a ratio is a multiple of 1/" << model.num_blocks()
        << " (0.25, 0.5 and 0.75 end at stage boundaries); or name the last frozen block with "
           "--split-at";
    throw std::invalid_argument(msg.str());
  }
  return blocks;
}

int64_t prefix_blocks_for_name(const BlockModel& model, const std::string& name) {
  std::string known;
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    if (model.block_names[i] == name) return i + 1;
    known += (i ? ", " : "") + model.block_names[i];
  }
  throw std::invalid_argument("no block named '" + name + "' (blocks: " + known + ")");
}

SplitModel split_block_model(const BlockModel& model, int64_t prefix_blocks) {
  if (prefix_blocks < 0 || prefix_blocks > model.num_blocks()) {
    throw std::invalid_argument("split point out of range");
  }
  SplitModel split;
  split.prefix_blocks = prefix_blocks;
  split.total_blocks = model.num_blocks();
  split.split_at = prefix_blocks == 0 ? "input" : model.block_names[prefix_blocks - 1];
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    (i < prefix_blocks ? split.prefix : split.head)->append(model.block_names[i], model.blocks[i]);
  }
  split.head->append("fc", nn::AnyModule(model.classifier));
  split.prefix->eval();
  for (auto& p : split.prefix->parameters()) p.set_requires_grad(false);
  split.head->train();
  return split;
}

}  // namespace recycle
