#include "engine/train/freeze_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>


namespace recycle {

namespace {

const char* kForms = "linear:START:LEVEL (START in [0, 1), LEVEL in (0, 1]) or auto[:THRESHOLD] "
                     "(THRESHOLD in (0, 1])";

std::vector<std::string> split_colons(const std::string& text) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == ':') {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

double parse_fraction(const std::string& text, const std::string& spec) {
  size_t used = 0;
  double v = std::numeric_limits<double>::quiet_NaN();
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(v)) {
    throw std::invalid_argument("--freeze " + spec + ": '" + text + "' is not a number; give " +
                                kForms);
  }
  return v;
}

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

std::string FreezeRule::name() const {
  switch (kind) {
    case Kind::kLinear: return "linear";
    case Kind::kAuto: return "auto";
    case Kind::kNone: break;
  }
  return "none";
}

std::string FreezeRule::spec() const {
  switch (kind) {
    case Kind::kLinear: return "linear:" + number(start) + ":" + number(level);
    case Kind::kAuto: return "auto:" + number(threshold);
    case Kind::kNone: break;
  }
  return "none";
}

FreezeRule parse_freeze_rule(const std::string& spec) {
  const std::vector<std::string> parts = split_colons(spec);
  FreezeRule rule;
  if (!parts.empty() && parts[0] == "linear" && parts.size() == 3) {
    rule.kind = FreezeRule::Kind::kLinear;
    rule.start = parse_fraction(parts[1], spec);
    rule.level = parse_fraction(parts[2], spec);
    if (!(rule.start >= 0 && rule.start < 1) || !(rule.level > 0 && rule.level <= 1)) {
      throw std::invalid_argument("--freeze " + spec + ": out of range; give " + kForms);
    }
    return rule;
  }
  if (!parts.empty() && parts[0] == "auto" && parts.size() <= 2) {
    rule.kind = FreezeRule::Kind::kAuto;
    if (parts.size() == 2) rule.threshold = parse_fraction(parts[1], spec);
    if (!(rule.threshold > 0 && rule.threshold <= 1)) {
      throw std::invalid_argument("--freeze " + spec + ": out of range; give " + kForms);
    }
    return rule;
  }
  throw std::invalid_argument("--freeze '" + spec + "' is not a freeze schedule; give " + kForms);
}

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
