// Record: what the cache stores for one key: one or more float tensors (an activation; for
// text also a mask or lengths), each encoded by a codec, behind a header and a checksum.
//
// Layout (little-endian):
//   "RCR" version:u8 | n_tensors:u8 pad:3
//   per tensor: dtype:u8 codec:u8 ndim:u8 pad:1 dims:u32 x ndim
//   payloads, one after another (numel x codec_value_bytes each)
//   checksum:u64 = XXH3-64 of every byte before it
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/codec.h"
#include "cache/status.h"

namespace recycle {

constexpr uint8_t kRecordFormatVersion = 1;
constexpr uint8_t kDtypeFloat32 = 1;  // the logical dtype of a decoded tensor

// A float array to encode: row-major, `data` holds product(shape) values.
struct FloatArrayRef {
  const float* data = nullptr;
  std::vector<int64_t> shape;
};

// One tensor inside an encoded record; points into the record's bytes (which must outlive it).
struct RecordTensor {
  Codec codec = Codec::kFp32;
  std::vector<int64_t> shape;
  const char* payload = nullptr;
  int64_t numel() const;
};

// Encodes tensors with one codec. Throws std::invalid_argument for 0 or > 255 tensors, a
// rank over 8, or a dimension outside [1, 2^31).
std::string encode_record(Codec codec, const std::vector<FloatArrayRef>& tensors);

// Checks magic, version, sizes and checksum, and lists the tensors. Corruption names what is
// wrong. Does not copy or decode the payloads.
Status parse_record(std::string_view bytes, std::vector<RecordTensor>* tensors);

// Decodes one tensor's values into out (numel() floats).
void decode_tensor(const RecordTensor& tensor, float* out);

}  // namespace recycle
