// A block model cut in two: a frozen prefix (the blocks whose outputs are cached) and a
// trainable head (the remaining blocks and the classifier). Blocks are shared with the model,
// not copied.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "engine/models/block_model.h"

namespace recycle {

// The prefix is frozen: eval mode, requires_grad off. The head is in train mode.
struct SplitModel {
  BlockStack prefix;
  BlockStack head;
  int64_t prefix_blocks = 0;
  int64_t total_blocks = 0;
  std::string split_at;  // name of the prefix's last block, "input" when the prefix is empty
};

// round(ratio * blocks); throws std::invalid_argument unless 0 <= ratio <= 1 and the ratio
// ends on a block.
int64_t prefix_blocks_for_ratio(const BlockModel& model, double ratio);
// The number of blocks up to and including the block named `name`; throws listing the names.
int64_t prefix_blocks_for_name(const BlockModel& model, const std::string& name);
SplitModel split_block_model(const BlockModel& model, int64_t prefix_blocks);

}  // namespace recycle
