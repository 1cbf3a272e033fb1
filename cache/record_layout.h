// RecordLayout's functions: the layout of an old manifest, its checks, against a record too, and
// its words for messages. The type (TensorLayout, RecordLayout) is public, part of the cache's
// identity (recycle/manifest.h). Every function is pure and thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/record.h"
#include "recycle/manifest.h"  // TensorLayout, RecordLayout, kVariableDim, kRawCodecName
#include "recycle/status.h"

namespace recycle {

// The layout of a cache made before layouts were stored: one float32 tensor per record shape,
// each with `codec`; the first is named "activation", further ones "tensor1", "tensor2", ...
RecordLayout layout_from_shapes(const std::vector<std::vector<int64_t>>& shapes, Codec codec);
// The shapes of the layout's tensors (what a manifest's record_shapes holds), -1 kept.
std::vector<std::vector<int64_t>> layout_shapes(const RecordLayout& layout);

// Checks that a layout can describe records: at most 255 tensors, names non-empty and
// distinct, rank <= 8, each dimension in [1, 2^31) or kVariableDim (a codec always fits: the
// manifest's reader refuses a codec word that does not fit the dtype). InvalidArgument naming
// the tensor and what is wrong.
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
