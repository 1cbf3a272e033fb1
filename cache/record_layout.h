// RecordLayout: what every record of a cache holds, tensor by tensor: a name, a dtype, a shape
// per sample in which -1 marks a variable dimension (a text's sequence length), and for float
// tensors the codec. The manifest keeps it as part of the cache's identity (cache/manifest.h);
// a record's tensors are matched to it by position, since records store no names
// (cache/record.h). Value types; every function is pure and thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/record.h"
#include "cache/status.h"

namespace recycle {

// A dimension whose size may differ from record to record (any size >= 1).
constexpr int64_t kVariableDim = -1;
// The codec name of a tensor stored exactly (every dtype but float32).
constexpr const char* kRawCodecName = "raw";

struct TensorLayout {
  std::string name;               // e.g. "activation", "lengths", "mask"; unique in a layout
  Dtype dtype = Dtype::kFloat32;
  std::vector<int64_t> shape;     // per sample; each dimension >= 1 or kVariableDim; rank <= 8
  std::string codec = "fp32";     // float32: "fp32", "fp16" or "bf16"; other dtypes: "raw"

  friend bool operator==(const TensorLayout& a, const TensorLayout& b) {
    return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.codec == b.codec;
  }
  friend bool operator!=(const TensorLayout& a, const TensorLayout& b) { return !(a == b); }
};

// In record order. Empty only in a manifest that has no records yet.
using RecordLayout = std::vector<TensorLayout>;

// The layout of a cache made before layouts were stored: one float32 tensor per record shape,
// each with `codec`; the first is named "activation", further ones "tensor1", "tensor2", ...
RecordLayout layout_from_shapes(const std::vector<std::vector<int64_t>>& shapes,
                                const std::string& codec);
// The shapes of the layout's tensors (what a manifest's record_shapes holds), -1 kept.
std::vector<std::vector<int64_t>> layout_shapes(const RecordLayout& layout);

// Checks that a layout can describe records: at most 255 tensors, names non-empty and
// distinct, rank <= 8, each dimension in [1, 2^31) or kVariableDim, and a codec that fits
// the dtype (a float codec for float32, "raw" for the rest). InvalidArgument naming the
// tensor and what is wrong.
Status check_layout(const RecordLayout& layout);

// Checks one parsed record against the layout: the number of tensors, each one's dtype,
// rank, fixed dimensions (a variable one takes any size) and, for float32, codec.
// Corruption naming the first difference, e.g. "record tensor 1 (lengths) is float32, the
// layout says int64".
Status check_record_layout(const std::vector<RecordTensor>& tensors, const RecordLayout& layout);

// "activation float32 64x7x7 fp16 + lengths int64 1 raw"; "no tensors" for an empty layout.
std::string layout_string(const RecordLayout& layout);

// "2x7x7" (a variable dimension prints as "?", "()" for a scalar): a shape for messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace recycle
