#include "cache/record.h"

#include <cstring>
#include <limits>
#include <stdexcept>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/coding.h"

namespace recycle {

namespace {

constexpr size_t kPrefixBytes = 8;
constexpr size_t kChecksumBytes = 8;
constexpr size_t kMaxRank = 8;

}  // namespace

int64_t RecordTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string encode_record(Codec codec, const std::vector<FloatArrayRef>& tensors) {
  if (tensors.empty() || tensors.size() > 255) {
    throw std::invalid_argument("encode_record: a record holds 1 to 255 tensors");
  }
  const size_t vb = codec_value_bytes(codec);
  std::string out = {'R', 'C', 'R', static_cast<char>(kRecordFormatVersion),
                     static_cast<char>(tensors.size()), 0, 0, 0};
  size_t payload_bytes = 0;
  for (const FloatArrayRef& t : tensors) {
    if (t.shape.size() > kMaxRank) throw std::invalid_argument("encode_record: rank over 8");
    out.push_back(static_cast<char>(kDtypeFloat32));
    out.push_back(static_cast<char>(codec));
    out.push_back(static_cast<char>(t.shape.size()));
    out.push_back(0);
    size_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 1 || d > std::numeric_limits<int32_t>::max()) {
        throw std::invalid_argument("encode_record: dimension out of range");
      }
      put_le32(&out, static_cast<uint32_t>(d));
      numel *= static_cast<size_t>(d);
    }
    payload_bytes += numel * vb;
  }
  size_t pos = out.size();
  out.resize(pos + payload_bytes + kChecksumBytes);
  for (const FloatArrayRef& t : tensors) {
    size_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<size_t>(d);
    encode_values(codec, t.data, numel, out.data() + pos);
    pos += numel * vb;
  }
  const uint64_t sum = XXH3_64bits(out.data(), pos);
  put_le64(out.data() + pos, sum);
  return out;
}

Status parse_record(std::string_view bytes, std::vector<RecordTensor>* tensors) {
  tensors->clear();
  if (bytes.size() < kPrefixBytes + kChecksumBytes) {
    return Status::corruption("record of " + std::to_string(bytes.size()) + " bytes is too short");
  }
  if (bytes[0] != 'R' || bytes[1] != 'C' || bytes[2] != 'R') {
    return Status::corruption("record has a bad magic");
  }
  const size_t body = bytes.size() - kChecksumBytes;
  const uint64_t stored = get_le64(bytes.data() + body);
  if (XXH3_64bits(bytes.data(), body) != stored) {
    return Status::corruption("record checksum mismatch");
  }
  if (static_cast<uint8_t>(bytes[3]) != kRecordFormatVersion) {
    return Status::corruption("record format version " + std::to_string(uint8_t(bytes[3])) +
                              " is not " + std::to_string(kRecordFormatVersion));
  }
  const size_t n = static_cast<uint8_t>(bytes[4]);
  if (n == 0) return Status::corruption("record holds no tensors");
  size_t pos = kPrefixBytes;
  uint64_t payload = 0;
  tensors->resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (pos + 4 > body) return Status::corruption("record header is cut short");
    RecordTensor& t = (*tensors)[i];
    if (static_cast<uint8_t>(bytes[pos]) != kDtypeFloat32) {
      return Status::corruption("record tensor has an unknown dtype");
    }
    if (!codec_from_byte(static_cast<uint8_t>(bytes[pos + 1]), &t.codec)) {
      return Status::corruption("record tensor has an unknown codec");
    }
    const size_t ndim = static_cast<uint8_t>(bytes[pos + 2]);
    if (ndim > kMaxRank) return Status::corruption("record tensor rank over 8");
    pos += 4;
    if (pos + 4 * ndim > body) return Status::corruption("record header is cut short");
    t.shape.resize(ndim);
    uint64_t numel = 1;
    for (size_t d = 0; d < ndim; ++d) {
      t.shape[d] = get_le32(bytes.data() + pos + 4 * d);
      if (t.shape[d] < 1 || t.shape[d] > std::numeric_limits<int32_t>::max()) {
        return Status::corruption("record tensor has a bad dimension");
      }
      numel *= static_cast<uint64_t>(t.shape[d]);
      if (numel > body) return Status::corruption("record tensor larger than the record");
    }
    pos += 4 * ndim;
    payload += numel * codec_value_bytes(t.codec);
  }
  if (pos + payload != body) {
    return Status::corruption("record payload is " + std::to_string(body - pos) +
                              " bytes, header says " + std::to_string(payload));
  }
  for (RecordTensor& t : *tensors) {
    t.payload = bytes.data() + pos;
    pos += static_cast<size_t>(t.numel()) * codec_value_bytes(t.codec);
  }
  return Status();
}

void decode_tensor(const RecordTensor& tensor, float* out) {
  decode_values(tensor.codec, tensor.payload, static_cast<size_t>(tensor.numel()), out);
}

}  // namespace recycle
