// engine/train/compact_batch.h: batches kept in their records' codes and widened on the device.
#include "engine/train/compact_batch.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "cache/record_layout.h"

namespace recycle {

namespace {

torch::ScalarType code_dtype(Codec codec) {
  switch (codec) {
    case Codec::kFp16: return torch::kHalf;
    case Codec::kBf16: return torch::kBFloat16;
    case Codec::kInt8: return torch::kUInt8;
    case Codec::kFp32: break;
  }
  throw std::invalid_argument("a compact tensor holds fp16, bf16 or int8 codes, not " +
                              codec_name(codec));
}

}  // namespace

bool is_compact_codec(Codec codec) { return codec != Codec::kFp32; }

CompactTensor make_compact(Codec codec, const std::vector<int64_t>& shape, int64_t n, bool pinned) {
  CompactTensor c;
  c.codec = codec;
  c.shape = shape;
  std::vector<int64_t> full = {n};
  full.insert(full.end(), shape.begin(), shape.end());
  c.codes = torch::empty(full, torch::dtype(code_dtype(codec)).pinned_memory(pinned));
  if (codec == Codec::kInt8) {
    const int64_t channels = static_cast<int64_t>(channels_of(shape));
    c.scale_offset =
        torch::empty({n, channels, 2}, torch::dtype(torch::kFloat32).pinned_memory(pinned));
  }
  return c;
}

void copy_payload(const RecordTensor& tensor, int64_t row, CompactTensor* c) {
  if (tensor.dtype != Dtype::kFloat32 || tensor.codec != c->codec || tensor.shape != c->shape) {
    throw std::invalid_argument("copy_payload: a record tensor " + dtype_name(tensor.dtype) + " " +
                                shape_string(tensor.shape) + " in " + codec_name(tensor.codec) +
                                " does not fit a compact tensor of " + shape_string(c->shape) +
                                " in " + codec_name(c->codec));
  }
  const int64_t numel = tensor.numel();
  const size_t code_bytes = static_cast<size_t>(numel) * codec_value_bytes(c->codec);
  const char* payload = tensor.payload;
  if (c->codec == Codec::kInt8) {
    const int64_t channels = c->scale_offset.size(1);
    const size_t header = static_cast<size_t>(channels) * codec_channel_bytes(Codec::kInt8);
    std::memcpy(static_cast<char*>(c->scale_offset.data_ptr()) + row * static_cast<int64_t>(header),
                payload, header);  // (scale, offset) f32 pairs, little-endian as the host's
    payload += header;
  }
  std::memcpy(static_cast<char*>(c->codes.data_ptr()) + row * static_cast<int64_t>(code_bytes),
              payload, code_bytes);
}

torch::Tensor expand_compact(const CompactTensor& c, const torch::Device& device,
                             c10::MemoryFormat format) {
  const torch::Tensor codes = c.codes.to(device, /*non_blocking=*/c.codes.is_pinned());
  torch::Tensor out;
  if (c.codec == Codec::kInt8) {
    const torch::Tensor so = c.scale_offset.to(device, /*non_blocking=*/c.scale_offset.is_pinned());
    const int64_t n = codes.size(0), channels = so.size(1);
    const torch::Tensor q = codes.reshape({n, channels, -1}).to(torch::kFloat32);
    const torch::Tensor scale = so.select(2, 0).unsqueeze(2);
    const torch::Tensor offset = so.select(2, 1).unsqueeze(2);
    out = (offset + scale * q).reshape(codes.sizes());
  } else {
    out = codes.to(torch::kFloat32);
  }
  return format == c10::MemoryFormat::Contiguous ? out : out.contiguous(format);
}

}  // namespace recycle
