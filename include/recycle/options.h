// The closed sets of the options a user fills (optimizer, schedule, precision, memory format,
// gradient sync and compression, codec, RocksDB compression), each an enum with one table of
// names: parse_X(name) -> X (std::invalid_argument naming the choices otherwise), X_name(X) and
// X_names() (in the order help texts list them). The command line parses its strings with
// these once; the library sees only the enums. No LibTorch here; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/codec.h"  // enum class Codec: fp32 | fp16 | bf16 | int8

namespace recycle {

// The optimizer of a training run: SGD (momentum, Nesterov) or AdamW.
enum class Optimizer { kSgd, kAdamW };
Optimizer parse_optimizer(std::string_view name);
std::string optimizer_name(Optimizer optimizer);
std::vector<std::string> optimizer_names();

// The learning-rate schedule: cosine (per step, to 0), step (x0.1 at 50% and 75%), constant.
enum class Schedule { kCosine, kStep, kConstant };
Schedule parse_schedule(std::string_view name);
std::string schedule_name(Schedule schedule);
std::vector<std::string> schedule_names();

// Arithmetic of the training forward: fp32, or bf16 mixed precision under LibTorch's autocast
// (engine/train/precision.h).
enum class Precision { kFp32, kBf16 };
Precision parse_precision(std::string_view name);
std::string precision_name(Precision precision);
std::vector<std::string> precision_names();

// Layout of a trained module's 4-D tensors and of its 4-D inputs: NHWC ("channels_last") or
// NCHW ("contiguous"); engine/models/memory_format.h maps it to LibTorch's.
enum class MemoryFormat { kChannelsLast, kContiguous };
MemoryFormat parse_memory_format(std::string_view name);
std::string memory_format_name(MemoryFormat format);
std::vector<std::string> memory_format_names();

// How gradients travel between data-parallel ranks: none (fp32 allreduce), fp16 (halves,
// allreduce), topk (AdaComp: binned adaptive selection, quantised values, error feedback,
// allgather).
enum class GradCompression { kNone, kFp16, kTopk };
GradCompression parse_grad_compression(std::string_view name);
std::string grad_compression_name(GradCompression compression);
std::vector<std::string> grad_compression_names();

// How data-parallel ranks stay in step: "allreduce" averages gradients every step;
// "average:K" takes K local steps, then averages parameters (K >= 1).
struct Sync {
  enum class Kind { kAllreduce, kAverage };
  Kind kind = Kind::kAllreduce;
  int64_t every = 0;  // kAverage: K >= 1; 0 with kAllreduce

  bool operator==(const Sync& o) const { return kind == o.kind && every == o.every; }
  bool operator!=(const Sync& o) const { return !(*this == o); }
};
// "allreduce" or "average:K" (K of 1..6 digits, >= 1); throws std::invalid_argument otherwise.
Sync parse_sync(std::string_view name);
std::string sync_name(const Sync& sync);  // "allreduce" or "average:K"

// Codec (cache/codec.h): how records store activations. codec_name and codec_names are
// cache/codec.h's; this parse throws where cache/codec.h's returns false.
Codec parse_codec(std::string_view name);

// RocksDB's compression of the records a build writes.
enum class Compression { kNone, kLz4, kZstd };
Compression parse_compression(std::string_view name);
std::string compression_name(Compression compression);
std::vector<std::string> compression_names();

}  // namespace recycle
