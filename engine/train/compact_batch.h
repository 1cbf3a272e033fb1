// CompactTensor: a batch's float32 tensor kept as its records store it (fp16 or bf16 codes, or
// int8 codes with their per-channel scale and offset), so that a batch for a GPU crosses the
// bus in half (fp16, bf16) or about a quarter (int8) of the bytes of float32, and is widened
// there. CachedBatches fills one row per record by copying the record's payload (no decode on
// the host) and expands it on the batch's device (engine/train/batch_sources.h,
// set_device_decode). On the CPU device the same expansion runs on the CPU: that is how it is
// tested against the host decode (cache/codec.h), value for value.
//
// The expansion is the host decode's arithmetic: fp16 and bf16 widen exactly; int8 gives
// offset + scale * q per channel (channels: the tensor's first dimension, cache/record.h
// channels_of), in float32, as decode_values does (the host may fuse the multiply-add; the
// results agree within one rounding).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "cache/codec.h"
#include "cache/record.h"

namespace recycle {

struct CompactTensor {
  Codec codec = Codec::kFp16;
  std::vector<int64_t> shape;  // per sample
  // fp16: kHalf, bf16: kBFloat16, int8: kUInt8 codes; [n, ...shape].
  torch::Tensor codes;
  // int8 only: float32 [n, channels, 2], each channel's (scale, offset) as the record stores it.
  torch::Tensor scale_offset;
};

// True for the codecs a CompactTensor holds: fp16, bf16, int8 (not fp32: nothing to save).
bool is_compact_codec(Codec codec);

// An empty compact tensor of n samples of `shape` in `codec`, in pinned host memory when
// `pinned` (which needs a GPU). Throws std::invalid_argument for fp32.
CompactTensor make_compact(Codec codec, const std::vector<int64_t>& shape, int64_t n, bool pinned);

// Copies a record tensor's payload into row `row` of *c. Throws std::invalid_argument when the
// tensor is not float32 in c's codec with c's shape (a record of another layout).
void copy_payload(const RecordTensor& tensor, int64_t row, CompactTensor* c);

// The float32 tensor [n, ...shape] the compact tensor holds, widened on `device` (the codes
// copied there first, non_blocking when they are pinned), in `format` (ChannelsLast for a
// [n, C, H, W] batch whose convolutions want it; else Contiguous).
torch::Tensor expand_compact(const CompactTensor& c, const torch::Device& device,
                             c10::MemoryFormat format = c10::MemoryFormat::Contiguous);

}  // namespace recycle
