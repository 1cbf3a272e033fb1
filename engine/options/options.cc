// The name tables of the options' closed sets (include/recycle/options.h). One table per enum;
// parse, name and the list of names all read it. And the home of the options structs'
// validate(): TrainHyper's, ModelOptions' and BuildOptions' here (the room recycle_options),
// every other struct's beside this file (see the section at the end).
#include "recycle/options.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "base/range_check.h"
#include "base/strings.h"
#include "cache/codec.h"  // parse_codec(name, &codec)
#include "cache/shard_rule.h"
#include "engine/data/augment.h"
#include "recycle/errors.h"

namespace recycle {

namespace {

template <typename E>
using Table = std::vector<std::pair<E, const char*>>;

template <typename E>
std::vector<std::string> names_of(const Table<E>& table) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.push_back(entry.second);
  return names;
}

// `what` names the flag in the message: "unknown --optimizer 'x' (known: sgd, adamw)".
template <typename E>
E parse_in(const Table<E>& table, std::string_view name, const char* what) {
  for (const auto& entry : table) {
    if (name == entry.second) return entry.first;
  }
  throw InvalidArgument("unknown " + std::string(what) + " '" + std::string(name) +
                        "' (known: " + join(names_of(table), ", ") + ")");
}

template <typename E>
std::string name_in(const Table<E>& table, E value, const char* what) {
  for (const auto& entry : table) {
    if (value == entry.first) return entry.second;
  }
  throw InvalidArgument("no " + std::string(what) + " has the value " +
                        std::to_string(static_cast<int>(value)));
}

const Table<Optimizer>& optimizers() {
  static const Table<Optimizer> t = {{Optimizer::kSgd, "sgd"}, {Optimizer::kAdamW, "adamw"}};
  return t;
}
const Table<Schedule>& schedules() {
  static const Table<Schedule> t = {
      {Schedule::kCosine, "cosine"}, {Schedule::kStep, "step"}, {Schedule::kConstant, "constant"}};
  return t;
}
const Table<Precision>& precisions() {
  static const Table<Precision> t = {{Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"},
                                     {Precision::kFp16, "fp16"}};
  return t;
}
const Table<MemoryFormat>& memory_formats() {
  static const Table<MemoryFormat> t = {{MemoryFormat::kChannelsLast, "channels_last"},
                                        {MemoryFormat::kContiguous, "contiguous"}};
  return t;
}
const Table<GradCompression>& grad_compressions() {
  static const Table<GradCompression> t = {{GradCompression::kNone, "none"},
                                           {GradCompression::kFp16, "fp16"},
                                           {GradCompression::kTopk, "topk"}};
  return t;
}
const Table<Compression>& compressions() {
  static const Table<Compression> t = {
      {Compression::kNone, "none"}, {Compression::kLz4, "lz4"}, {Compression::kZstd, "zstd"}};
  return t;
}

}  // namespace

Optimizer parse_optimizer(std::string_view name) {
  return parse_in(optimizers(), name, "--optimizer");
}
std::string optimizer_name(Optimizer v) { return name_in(optimizers(), v, "--optimizer"); }
std::vector<std::string> optimizer_names() { return names_of(optimizers()); }

Schedule parse_schedule(std::string_view name) { return parse_in(schedules(), name, "--schedule"); }
std::string schedule_name(Schedule v) { return name_in(schedules(), v, "--schedule"); }
std::vector<std::string> schedule_names() { return names_of(schedules()); }

Precision parse_precision(std::string_view name) {
  return parse_in(precisions(), name, "--precision");
}
std::string precision_name(Precision v) { return name_in(precisions(), v, "--precision"); }
std::vector<std::string> precision_names() { return names_of(precisions()); }

MemoryFormat parse_memory_format(std::string_view name) {
  return parse_in(memory_formats(), name, "--memory-format");
}
std::string memory_format_name(MemoryFormat v) {
  return name_in(memory_formats(), v, "--memory-format");
}
std::vector<std::string> memory_format_names() { return names_of(memory_formats()); }

GradCompression parse_grad_compression(std::string_view name) {
  return parse_in(grad_compressions(), name, "--grad-compression");
}
std::string grad_compression_name(GradCompression v) {
  return name_in(grad_compressions(), v, "--grad-compression");
}
std::vector<std::string> grad_compression_names() { return names_of(grad_compressions()); }

Compression parse_compression(std::string_view name) {
  return parse_in(compressions(), name, "--compression");
}
std::string compression_name(Compression v) { return name_in(compressions(), v, "--compression"); }
std::vector<std::string> compression_names() { return names_of(compressions()); }

Codec parse_codec(std::string_view name) {
  Codec codec;
  if (!parse_codec(name, &codec)) {
    throw InvalidArgument("unknown codec '" + std::string(name) +
                          "' (known: " + join(codec_names(), ", ") + ")");
  }
  return codec;
}

namespace {

// "N" of 1..6 digits, >= 1, as a number; 0 when it is not one.
int64_t small_count(const std::string& k) {
  if (k.empty() || k.size() > 6 || k.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoll(k);
}

}  // namespace

Sync parse_sync(std::string_view name) {
  const std::string s(name);
  if (s == "allreduce") return Sync{};
  const std::string average = "average:";
  if (s.compare(0, average.size(), average) == 0) {
    const int64_t k = small_count(s.substr(average.size()));
    if (k >= 1) return Sync{Sync::Kind::kAverage, k, 0, 0};
  }
  if (s == "async") return Sync{Sync::Kind::kAsync, 0, 1, 1};
  const std::string async = "async:";
  if (s.compare(0, async.size(), async) == 0) {
    const std::string rest = s.substr(async.size());
    const size_t colon = rest.find(':');
    const int64_t push = small_count(rest.substr(0, colon));
    const int64_t fetch = colon == std::string::npos ? 1 : small_count(rest.substr(colon + 1));
    if (push >= 1 && fetch >= 1) return Sync{Sync::Kind::kAsync, 0, push, fetch};
  }
  throw InvalidArgument(
      "--sync must be allreduce, average:K or async[:PUSH[:FETCH]] with K, PUSH, FETCH >= 1, "
      "not '" + s + "'");
}

std::string sync_name(const Sync& sync) {
  switch (sync.kind) {
    case Sync::Kind::kAllreduce:
      return "allreduce";
    case Sync::Kind::kAverage:
      return "average:" + std::to_string(sync.average_every);
    case Sync::Kind::kAsync:
      return "async:" + std::to_string(sync.push_every) + ":" + std::to_string(sync.fetch_every);
  }
  return "allreduce";
}

}  // namespace recycle

// ---- the freeze schedule's spec -----------------------------------------------------------------

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

}  // namespace recycle

// ---- validate() of the option structs below the jobs ------------------------------------------
// The others live beside this file, one per struct, each compiled into the room that has what
// it checks with: dataset_validate.cc (data/), dist_validate.cc (distributed/),
// train_validate.cc, predict_validate.cc, writer_validate.cc, reader_validate.cc (jobs/).

namespace recycle {

void TrainHyper::validate() const {
  check_range("--epochs", epochs, int64_t{1}, kMaxEpochs);
  check_range("--batch", batch, int64_t{1}, kMaxBatch);
  check_positive_up_to("--lr", lr, kMaxLr);
  check_range("--momentum", momentum, 0.0, kMaxMomentum);
  check_range("--weight-decay", weight_decay, 0.0, kMaxWeightDecay);
  // A value outside its enum (a cast) is refused by its name's lookup.
  optimizer_name(optimizer);
  schedule_name(schedule);
  memory_format_name(memory_format);
  precision_name(precision);
  if (precision == Precision::kFp16) {
    throw InvalidArgument(
        "--precision fp16 applies to a build's prefix; training runs fp32 or bf16 "
        "(fp16 training would need a gradient scaler)");
  }
}

void ModelOptions::validate() const {
  if (width != 0) check_range("--width", width, int64_t{1}, kMaxWidth);
  if (max_tokens != 0) check_range("--max-tokens", max_tokens, int64_t{1}, kMaxTokensPerText);
  if (width > 0 && !weights.empty()) {
    throw InvalidArgument(
        "--width applies only without --weights (the weights file sets "
        "the width)");
  }
}

void BuildOptions::validate() const {
  model.validate();
  if (recycle != kNoRecycle) check_range("--recycle", recycle, 0.0, 1.0);
  check_range("--batch", batch, int64_t{1}, kMaxBatch);
  check_range("--threads", threads, 0, kMaxThreads);
  if (cache_dir.empty()) throw InvalidArgument("--cache DIR is required");
  codec_name(codec);  // throws for a value outside the enum
  compression_name(compression);
  precision_name(precision);
  check_range("--views", views, int64_t{0}, kMaxViews);
  if (views > 0 && augment.empty()) throw InvalidArgument("--views needs --augment SPEC");
  if (views == 0 && !augment.empty()) {
    throw InvalidArgument("--augment needs --views K (the views stored per sample)");
  }
  if (!augment.empty()) Augment::parse(augment);  // throws naming the op
  check_shard(shard, kMaxWorldSize);              // set by a sharded build, not a flag
}

}  // namespace recycle
