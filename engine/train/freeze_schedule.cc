#include "engine/train/freeze_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace recycle {

int64_t linear_frozen_blocks(double start, double level, double done, int64_t blocks) {
  if (done <= start) return 0;
  const double fraction = std::min(1.0, (done - start) / (1.0 - start)) * level;
  // The small allowance keeps an exact product such as 0.75 * 8 from landing just below 6.
  const auto n = static_cast<int64_t>(std::floor(fraction * static_cast<double>(blocks) + 1e-9));
  return std::clamp<int64_t>(n, 0, blocks);
}

double grad_norm_change(const GradNormHistory& history, int64_t epoch, int64_t block) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (epoch < 1 || epoch >= static_cast<int64_t>(history.size())) return nan;
  const std::vector<double>& now = history[epoch];
  const std::vector<double>& before = history[epoch - 1];
  if (block < 0 || block >= static_cast<int64_t>(now.size()) ||
      block >= static_cast<int64_t>(before.size())) {
    return nan;
  }
  const double a = now[block], b = before[block];
  if (!std::isfinite(a) || !std::isfinite(b) || !(b > 0)) return nan;
  return std::abs(a - b) / b;
}

int64_t frozen_blocks_after(const FreezeRule& rule, int64_t epoch, int64_t epochs,
                            int64_t blocks, int64_t frozen, const GradNormHistory& history) {
  if (epochs < 1 || epoch < 0 || epoch >= epochs || blocks < 0 || frozen < 0 || frozen > blocks) {
    throw std::invalid_argument("frozen_blocks_after: epoch " + std::to_string(epoch) + " of " +
                                std::to_string(epochs) + ", " + std::to_string(frozen) + " of " +
                                std::to_string(blocks) + " blocks frozen");
  }
  int64_t next = frozen;
  if (rule.kind == FreezeRule::Kind::kLinear) {
    const double done = static_cast<double>(epoch + 1) / static_cast<double>(epochs);
    next = linear_frozen_blocks(rule.start, rule.level, done, blocks);
  } else if (rule.kind == FreezeRule::Kind::kAuto && frozen < blocks) {
    const double change = grad_norm_change(history, epoch, frozen);
    if (change < rule.threshold) next = frozen + 1;  // false for NaN
  }
  return std::max(frozen, std::min(next, blocks));
}

}  // namespace recycle
