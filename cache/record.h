// Record: what the cache stores for one key: one or more tensors (an activation; for text also
// token lengths or a padding mask) behind a header and a checksum. Float tensors are encoded
// by a codec (cache/codec.h); integer and boolean tensors are stored exactly.
//
// Format version 1 (every integer little-endian; no alignment anywhere):
//   "RCR" version:u8 | n_tensors:u8 (1..255) pad:3 (zero)
//   per tensor: dtype:u8 codec:u8 ndim:u8 (0..8) pad:1 (zero) | dims:u32 x ndim (1..2^31-1)
//   payloads, one after another, in header order
//   checksum:u64 = XXH3-64 of every byte before it
// dtype and codec bytes, and the payload of one tensor (numel = product of dims):
//   1 float32  codec 1 fp32 / 2 fp16 / 3 bf16   numel x codec_value_bytes(codec)
//              codec 4 int8                      (scale:f32 offset:f32) x C, then numel x u8
//                                                (C = channels_of(shape) = shape[0], or 1 for
//                                                rank 0; cache/codec.h says how it decodes)
//   2 int64    codec 0 (raw)                     numel x 8, two's complement
//   3 int32    codec 0 (raw)                     numel x 4, two's complement
//   4 uint8    codec 0 (raw)                     numel x 1
//   5 bool     codec 0 (raw)                     numel x 1, each byte 0 or 1
// Records of float32 tensors only are byte for byte what every earlier version of this code
// wrote; dtypes 2-5 were added within version 1 (an older reader refuses them as an unknown
// dtype); so was codec 4 (int8), which an older reader refuses as an unknown codec. Records
// of codecs 1-3 are unchanged by it. An int8 tensor whose scale or offset is not finite, or
// whose scale is negative, is corruption. Tensor names are not stored: a record's tensors are
// matched to the cache's RecordLayout (cache/record_layout.h) by position.
//
// Everything here is a pure function of its arguments; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/codec.h"
#include "recycle/status.h"

namespace recycle {

constexpr uint8_t kRecordFormatVersion = 1;

// Dtype (the logical dtype of a record tensor, as stored in its dtype byte) and dtype_name are
// in recycle/formats.h.
constexpr uint8_t kDtypeFloat32 = static_cast<uint8_t>(Dtype::kFloat32);
// The codec byte of a tensor stored exactly (every dtype but float32).
constexpr uint8_t kCodecRawByte = 0;

// Parses a dtype_name(); false for anything else.
bool parse_dtype(std::string_view name, Dtype* out);
// Accepts a stored dtype byte; false for an unknown value.
bool dtype_from_byte(uint8_t byte, Dtype* out);
// Bytes of one decoded value: 4, 8, 4, 1, 1 (a bool is one byte, as in C++ and LibTorch).
size_t dtype_value_bytes(Dtype dtype);

// A float array to encode: row-major, `data` holds product(shape) values. Not owned.
struct FloatArrayRef {
  const float* data = nullptr;
  std::vector<int64_t> shape;
};

// One tensor to encode, of any dtype: row-major, `data` points to product(shape) values of
// the C++ type of `dtype` (float, int64_t, int32_t, uint8_t, bool), host byte order. Not
// owned: read during encode_record only. Build one with the named constructors.
struct TypedArrayRef {
  Dtype dtype = Dtype::kFloat32;
  Codec codec = Codec::kFp32;  // float32 only; the exact dtypes store no codec
  std::vector<int64_t> shape;
  const void* data = nullptr;
  // For messages only (not stored): encode_record's refusal of a value names the tensor by it
  // ("tensor 'hidden': ..."), else by its position ("tensor 0: ..."). Not owned.
  std::string_view name;

  static TypedArrayRef floats(const float* data, std::vector<int64_t> shape, Codec codec);
  static TypedArrayRef exact(const int64_t* data, std::vector<int64_t> shape);
  static TypedArrayRef exact(const int32_t* data, std::vector<int64_t> shape);
  static TypedArrayRef exact(const uint8_t* data, std::vector<int64_t> shape);
  static TypedArrayRef exact(const bool* data, std::vector<int64_t> shape);
};

// One tensor inside an encoded record; points into the record's bytes (which must outlive it).
struct RecordTensor {
  Dtype dtype = Dtype::kFloat32;
  Codec codec = Codec::kFp32;  // float32 tensors only; kFp32 (and meaningless) for the others
  std::vector<int64_t> shape;
  const char* payload = nullptr;
  int64_t numel() const;
  // Bytes of this tensor's payload in the record.
  size_t payload_bytes() const;
};

// The channels of a float tensor of this shape for a per-channel codec (int8): its first
// dimension, or 1 for a rank-0 tensor.
size_t channels_of(const std::vector<int64_t>& shape);

// Encodes tensors of any dtype, each float tensor with its own codec. Throws
// std::invalid_argument for 0 or > 255 tensors, a rank over 8, a dimension outside [1, 2^31),
// a dtype or codec value outside the enums; CodecRangeError (cache/codec.h) for a value a float
// tensor's codec cannot store (not finite, in any codec, or beyond the codec's range), its
// message starting with the tensor ("tensor 0: fp32 codec: value 12 of 784 is NaN; ...").
std::string encode_record(const std::vector<TypedArrayRef>& tensors);
// The same for float tensors only, all with one codec (what the image build writes).
std::string encode_record(Codec codec, const std::vector<FloatArrayRef>& tensors);

// Checks magic, version, sizes, checksum, every dtype and codec byte (a codec on an exact
// tensor, none on a float one, and a bool byte other than 0 or 1 are corruption) and the
// scales and offsets of int8 tensors (cache/codec.h check_payload), and lists the tensors in
// *tensors (resized to their count; what it held is overwritten, so a vector reused from record
// to record allocates nothing for the shapes once it is large enough). Corruption names what
// is wrong, and leaves *tensors unspecified. Does not copy or decode the payloads.
Status parse_record(std::string_view bytes, std::vector<RecordTensor>* tensors);

// Decodes a float32 tensor's values into out (numel() floats). Throws std::invalid_argument
// for a tensor of another dtype.
void decode_tensor(const RecordTensor& tensor, float* out);

// Copies an exact (non-float) tensor's values into out: numel() values of the C++ type of
// tensor.dtype, host byte order. Throws std::invalid_argument for a float32 tensor.
void decode_exact(const RecordTensor& tensor, void* out);
// The same, typed: throws std::invalid_argument unless tensor.dtype is the pointer's type.
void decode_exact(const RecordTensor& tensor, int64_t* out);
void decode_exact(const RecordTensor& tensor, int32_t* out);
void decode_exact(const RecordTensor& tensor, uint8_t* out);
void decode_exact(const RecordTensor& tensor, bool* out);

}  // namespace recycle
