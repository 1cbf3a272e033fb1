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

constexpr Dtype kAllDtypes[] = {Dtype::kFloat32, Dtype::kInt64, Dtype::kInt32, Dtype::kUint8,
                                Dtype::kBool};

size_t numel_of(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// Bytes of a tensor's payload: numel values, and for int8 a header per channel.
size_t stored_payload_bytes(Dtype dtype, Codec codec, const std::vector<int64_t>& shape) {
  const size_t n = numel_of(shape);
  return dtype == Dtype::kFloat32 ? codec_payload_bytes(codec, n, channels_of(shape))
                                  : n * dtype_value_bytes(dtype);
}

// Writes n exact values of `dtype` from `in` (host order) as the record stores them.
void encode_exact(Dtype dtype, const void* in, size_t n, char* out) {
  switch (dtype) {
    case Dtype::kInt64: {
      const auto* v = static_cast<const int64_t*>(in);
      for (size_t i = 0; i < n; ++i) put_le64(out + 8 * i, static_cast<uint64_t>(v[i]));
      return;
    }
    case Dtype::kInt32: {
      const auto* v = static_cast<const int32_t*>(in);
      for (size_t i = 0; i < n; ++i) put_le32(out + 4 * i, static_cast<uint32_t>(v[i]));
      return;
    }
    case Dtype::kUint8:
      std::memcpy(out, in, n);
      return;
    case Dtype::kBool: {
      const auto* v = static_cast<const bool*>(in);
      for (size_t i = 0; i < n; ++i) out[i] = v[i] ? 1 : 0;
      return;
    }
    case Dtype::kFloat32: break;
  }
  throw std::invalid_argument("encode_record: not an exact dtype");
}

void expect_dtype(const RecordTensor& t, Dtype want, const char* what) {
  if (t.dtype != want) {
    throw std::invalid_argument(std::string(what) + ": the record tensor is " +
                                dtype_name(t.dtype) + ", not " + dtype_name(want));
  }
}

}  // namespace

std::string dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32: return "float32";
    case Dtype::kInt64: return "int64";
    case Dtype::kInt32: return "int32";
    case Dtype::kUint8: return "uint8";
    case Dtype::kBool: return "bool";
  }
  return "unknown";
}

bool parse_dtype(std::string_view name, Dtype* out) {
  for (Dtype d : kAllDtypes) {
    if (name == dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

bool dtype_from_byte(uint8_t byte, Dtype* out) {
  if (byte < static_cast<uint8_t>(Dtype::kFloat32) || byte > static_cast<uint8_t>(Dtype::kBool)) {
    return false;
  }
  *out = static_cast<Dtype>(byte);
  return true;
}

size_t dtype_value_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32: return 4;
    case Dtype::kInt64: return 8;
    case Dtype::kInt32: return 4;
    case Dtype::kUint8: return 1;
    case Dtype::kBool: return 1;
  }
  return 0;
}

TypedArrayRef TypedArrayRef::floats(const float* data, std::vector<int64_t> shape, Codec codec) {
  return {Dtype::kFloat32, codec, std::move(shape), data};
}
TypedArrayRef TypedArrayRef::exact(const int64_t* data, std::vector<int64_t> shape) {
  return {Dtype::kInt64, Codec::kFp32, std::move(shape), data};
}
TypedArrayRef TypedArrayRef::exact(const int32_t* data, std::vector<int64_t> shape) {
  return {Dtype::kInt32, Codec::kFp32, std::move(shape), data};
}
TypedArrayRef TypedArrayRef::exact(const uint8_t* data, std::vector<int64_t> shape) {
  return {Dtype::kUint8, Codec::kFp32, std::move(shape), data};
}
TypedArrayRef TypedArrayRef::exact(const bool* data, std::vector<int64_t> shape) {
  return {Dtype::kBool, Codec::kFp32, std::move(shape), data};
}

int64_t RecordTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t RecordTensor::payload_bytes() const { return stored_payload_bytes(dtype, codec, shape); }

size_t channels_of(const std::vector<int64_t>& shape) {
  return shape.empty() ? 1 : static_cast<size_t>(shape[0]);
}

std::string encode_record(const std::vector<TypedArrayRef>& tensors) {
  if (tensors.empty() || tensors.size() > 255) {
    throw std::invalid_argument("encode_record: a record holds 1 to 255 tensors");
  }
  std::string out = {'R', 'C', 'R', static_cast<char>(kRecordFormatVersion),
                     static_cast<char>(tensors.size()), 0, 0, 0};
  size_t payload_bytes = 0;
  for (const TypedArrayRef& t : tensors) {
    Dtype dtype;
    Codec codec = t.codec;
    if (!dtype_from_byte(static_cast<uint8_t>(t.dtype), &dtype)) {
      throw std::invalid_argument("encode_record: unknown dtype");
    }
    const bool is_float = dtype == Dtype::kFloat32;
    if (is_float && !codec_from_byte(static_cast<uint8_t>(t.codec), &codec)) {
      throw std::invalid_argument("encode_record: unknown codec");
    }
    if (t.shape.size() > kMaxRank) throw std::invalid_argument("encode_record: rank over 8");
    out.push_back(static_cast<char>(dtype));
    out.push_back(static_cast<char>(is_float ? static_cast<uint8_t>(codec) : kCodecRawByte));
    out.push_back(static_cast<char>(t.shape.size()));
    out.push_back(0);
    for (int64_t d : t.shape) {
      if (d < 1 || d > std::numeric_limits<int32_t>::max()) {
        throw std::invalid_argument("encode_record: dimension out of range");
      }
      put_le32(&out, static_cast<uint32_t>(d));
    }
    payload_bytes += stored_payload_bytes(dtype, codec, t.shape);
  }
  size_t pos = out.size();
  out.resize(pos + payload_bytes + kChecksumBytes);
  for (size_t j = 0; j < tensors.size(); ++j) {
    const TypedArrayRef& t = tensors[j];
    const size_t numel = numel_of(t.shape);
    if (t.dtype == Dtype::kFloat32) {
      try {
        encode_values(t.codec, static_cast<const float*>(t.data), numel, channels_of(t.shape),
                      out.data() + pos);
        check_encoded_range(t.codec, static_cast<const float*>(t.data), numel, out.data() + pos);
      } catch (const CodecRangeError& e) {
        const std::string which =
            t.name.empty() ? std::to_string(j) : "'" + std::string(t.name) + "'";
        throw CodecRangeError("tensor " + which + ": " + e.what(), e.largest());
      }
      pos += codec_payload_bytes(t.codec, numel, channels_of(t.shape));
    } else {
      encode_exact(t.dtype, t.data, numel, out.data() + pos);
      pos += numel * dtype_value_bytes(t.dtype);
    }
  }
  put_le64(out.data() + pos, XXH3_64bits(out.data(), pos));
  return out;
}

std::string encode_record(Codec codec, const std::vector<FloatArrayRef>& tensors) {
  std::vector<TypedArrayRef> refs;
  refs.reserve(tensors.size());
  for (const FloatArrayRef& t : tensors)
    refs.push_back(TypedArrayRef::floats(t.data, t.shape, codec));
  return encode_record(refs);
}

namespace {

// Reads the header of tensor i of a record (`body`: its bytes before the checksum) at *pos into
// *tensor (dtype, codec, shape; no payload yet), moving *pos past it.
Status parse_tensor_header(std::string_view bytes, size_t body, size_t i, size_t* pos,
                           RecordTensor* tensor) {
  if (*pos + 4 > body) return Status::corruption("record header is cut short");
  RecordTensor& t = *tensor;
  t.codec = Codec::kFp32;
  t.payload = nullptr;
  auto which = [i] { return "record tensor " + std::to_string(i); };
  const uint8_t dtype_byte = static_cast<uint8_t>(bytes[*pos]);
  const uint8_t codec_byte = static_cast<uint8_t>(bytes[*pos + 1]);
  if (!dtype_from_byte(dtype_byte, &t.dtype)) {
    return Status::corruption(which() + " has an unknown dtype " + std::to_string(dtype_byte));
  }
  if (t.dtype == Dtype::kFloat32) {
    if (!codec_from_byte(codec_byte, &t.codec)) {
      return Status::corruption(which() + " has an unknown codec " + std::to_string(codec_byte));
    }
  } else if (codec_byte != kCodecRawByte) {
    return Status::corruption(which() + " has dtype " + dtype_name(t.dtype) +
                              " and codec byte " + std::to_string(codec_byte) +
                              " (only float32 tensors have a codec)");
  }
  const size_t ndim = static_cast<uint8_t>(bytes[*pos + 2]);
  if (ndim > kMaxRank) return Status::corruption(which() + " rank over 8");
  *pos += 4;
  if (*pos + 4 * ndim > body) return Status::corruption("record header is cut short");
  t.shape.resize(ndim);
  uint64_t numel = 1;
  for (size_t d = 0; d < ndim; ++d) {
    t.shape[d] = get_le32(bytes.data() + *pos + 4 * d);
    if (t.shape[d] < 1 || t.shape[d] > std::numeric_limits<int32_t>::max()) {
      return Status::corruption(which() + " has a bad dimension");
    }
    numel *= static_cast<uint64_t>(t.shape[d]);
    if (numel > body) return Status::corruption(which() + " larger than the record");
  }
  *pos += 4 * ndim;
  return Status();
}

// Checks the payload of tensor i of a record, [t.payload, end): a float32 codec's (its int8
// scales), a bool tensor's bytes (0 or 1).
Status check_tensor_payload(const RecordTensor& t, size_t i, const char* end) {
  if (t.dtype == Dtype::kFloat32) {
    const std::string problem = check_payload(t.codec, t.payload, channels_of(t.shape));
    if (!problem.empty()) {
      return Status::corruption("record tensor " + std::to_string(i) + ": " + problem);
    }
  }
  if (t.dtype == Dtype::kBool) {
    for (const char* p = t.payload; p != end; ++p) {
      if (*p != 0 && *p != 1) {
        return Status::corruption("record tensor " + std::to_string(i) +
                                  " is bool with a byte other than 0 or 1");
      }
    }
  }
  return Status();
}

}  // namespace

Status parse_record(std::string_view bytes, std::vector<RecordTensor>* tensors) {
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
  // The tensors a vector held before keep their shapes' memory: reading records one after
  // another into one vector allocates nothing once it has held the largest.
  tensors->resize(n);
  for (size_t i = 0; i < n; ++i) {
    RecordTensor& t = (*tensors)[i];
    const Status st = parse_tensor_header(bytes, body, i, &pos, &t);
    if (!st.ok()) return st;
    payload += stored_payload_bytes(t.dtype, t.codec, t.shape);
  }
  if (pos + payload != body) {
    return Status::corruption("record payload is " + std::to_string(body - pos) +
                              " bytes, header says " + std::to_string(payload));
  }
  for (size_t i = 0; i < n; ++i) {
    RecordTensor& t = (*tensors)[i];
    t.payload = bytes.data() + pos;
    pos += t.payload_bytes();
    const Status st = check_tensor_payload(t, i, bytes.data() + pos);
    if (!st.ok()) return st;
  }
  return Status();
}

void decode_tensor(const RecordTensor& tensor, float* out) {
  expect_dtype(tensor, Dtype::kFloat32, "decode_tensor");
  decode_values(tensor.codec, tensor.payload, static_cast<size_t>(tensor.numel()),
                channels_of(tensor.shape), out);
}

void decode_exact(const RecordTensor& tensor, void* out) {
  const size_t n = static_cast<size_t>(tensor.numel());
  const char* in = tensor.payload;
  switch (tensor.dtype) {
    case Dtype::kInt64: {
      auto* v = static_cast<int64_t*>(out);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(get_le64(in + 8 * i));
      return;
    }
    case Dtype::kInt32: {
      auto* v = static_cast<int32_t*>(out);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(get_le32(in + 4 * i));
      return;
    }
    case Dtype::kUint8:
      std::memcpy(out, in, n);
      return;
    case Dtype::kBool: {
      auto* v = static_cast<bool*>(out);
      for (size_t i = 0; i < n; ++i) v[i] = in[i] != 0;
      return;
    }
    case Dtype::kFloat32: break;
  }
  throw std::invalid_argument("decode_exact: the record tensor is " + dtype_name(tensor.dtype) +
                              ", decode it with decode_tensor");
}

namespace {

template <typename T>
void decode_typed(const RecordTensor& tensor, Dtype want, T* out) {
  expect_dtype(tensor, want, "decode_exact");
  decode_exact(tensor, static_cast<void*>(out));
}

}  // namespace

void decode_exact(const RecordTensor& t, int64_t* out) { decode_typed(t, Dtype::kInt64, out); }
void decode_exact(const RecordTensor& t, int32_t* out) { decode_typed(t, Dtype::kInt32, out); }
void decode_exact(const RecordTensor& t, uint8_t* out) { decode_typed(t, Dtype::kUint8, out); }
void decode_exact(const RecordTensor& t, bool* out) { decode_typed(t, Dtype::kBool, out); }

}  // namespace recycle
