// libFuzzer harness for the record format (cache/record.h), the codecs (cache/codec.h) and
// the record layout check (cache/record_layout.h).
//
// 1. parse_record on the raw input and on the input "resealed" (its last 8 bytes replaced by
//    the right XXH3-64, so the fuzzer gets past the checksum into the header checks). When a
//    parse is OK: every payload lies inside the body, decode_tensor (float32) or decode_exact
//    (the other dtypes) fills exactly numel values (ASan checks the bounds), a bool decodes
//    to 0 or 1, the record fits the layout made from its own tensors (with dimensions made
//    variable) and not one with a dimension changed, and when the record is canonical (zero
//    padding, no NaN in a 16-bit payload) encoding the decoded values gives back the same
//    bytes.
// 2. A round trip: the input is read as a list of tensors, each a dtype (float32 with a codec,
//    int64, int32, uint8, bool), a shape and values; encode_record, parse_record (must be OK
//    with the same dtypes and shapes), decode, and every float must equal an independent
//    reference of fp32 / fp16 / bf16 rounding (round to nearest even; NaN stays NaN), every
//    other value must come back exactly. Inputs with a bad shape must give
//    std::invalid_argument.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <xxhash.h>

#include "base/coding.h"
#include "cache/codec.h"
#include "cache/record.h"
#include "cache/record_layout.h"
#include "fuzz/fuzz_util.h"

namespace {

using recycle::Codec;
using recycle::Dtype;
using recycle::fuzz::fail;

// ---- independent references for the 16-bit codecs ------------------------------------------

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// fp32 -> IEEE binary16, round to nearest even, computed in double (all steps exact).
uint16_t ref_fp16_encode(float f) {
  const uint16_t sign = (bits_of(f) >> 16) & 0x8000;
  if (std::isnan(f)) return sign | 0x7E00;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7C00;  // 65520 ties to the even neighbour: infinity
  if (a < std::ldexp(1.0, -14)) {          // subnormal (or zero) result
    const double q = std::nearbyint(a / std::ldexp(1.0, -24));
    return sign | static_cast<uint16_t>(q);  // q == 1024 is the smallest normal, also right
  }
  int k;
  std::frexp(a, &k);  // a = m * 2^k, m in [0.5, 1)
  int e = k - 1;      // a in [2^e, 2^(e+1))
  double q = std::nearbyint(a / std::ldexp(1.0, e - 10));  // in [1024, 2048]
  if (q == 2048.0) q = 1024.0, ++e;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | (static_cast<int>(q) - 1024));
}

float ref_fp16_decode(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return static_cast<float>(s * std::ldexp(m, -24));
  if (e == 31) return m == 0 ? static_cast<float>(s * INFINITY) : NAN;
  return static_cast<float>(s * std::ldexp(1024 + m, e - 25));
}

// fp32 -> bfloat16 (the upper 16 bits), round to nearest even on the dropped 16 bits.
uint16_t ref_bf16_encode(float f) {
  if (std::isnan(f)) return 0x7FC0;
  const uint32_t b = bits_of(f);
  uint32_t upper = b >> 16;
  const uint32_t lower = b & 0xFFFF;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) ++upper;  // carries into the exponent
  return static_cast<uint16_t>(upper);
}
float ref_bf16_decode(uint16_t h) { return float_of(uint32_t{h} << 16); }

float reference_round_trip(Codec codec, float x) {
  switch (codec) {
    case Codec::kFp32: return x;
    case Codec::kFp16: return ref_fp16_decode(ref_fp16_encode(x));
    case Codec::kBf16: return ref_bf16_decode(ref_bf16_encode(x));
    case Codec::kInt8: break;  // not in the round trip: it depends on the whole channel
  }
  fail("unknown codec");
}

bool same_value(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return bits_of(got) == bits_of(want);
}

// ---- 1. parsing arbitrary bytes ------------------------------------------------------------

// A tensor's decoded values: floats, or the exact values' bytes in host order.
struct Decoded {
  std::vector<float> floats;
  std::vector<char> exact;  // numel x dtype_value_bytes
};

void parse_and_decode(std::string_view bytes, bool resealed) {
  std::vector<recycle::RecordTensor> tensors;
  const recycle::Status st = recycle::parse_record(bytes, &tensors);
  if (!st.ok()) {
    FUZZ_CHECK(st.is_corruption(), "parse_record gave " + st.to_string());
    FUZZ_CHECK(!(resealed && st.message() == "record checksum mismatch"),
               "a resealed record fails its checksum");
    return;
  }
  FUZZ_CHECK(bytes.size() >= 16 && !tensors.empty() && tensors.size() <= 255,
             "OK record of impossible size");
  const char* body_end = bytes.data() + bytes.size() - 8;
  const char* expected_payload = nullptr;
  bool canonical = bytes[5] == 0 && bytes[6] == 0 && bytes[7] == 0;
  size_t header_pos = 8;
  std::vector<Decoded> values;
  recycle::RecordLayout layout;
  for (const recycle::RecordTensor& t : tensors) {
    FUZZ_CHECK(t.shape.size() <= 8, "rank over 8");
    for (int64_t d : t.shape) FUZZ_CHECK(d >= 1 && d <= INT32_MAX, "bad dimension");
    const int64_t n = t.numel();
    const size_t vb = t.dtype == Dtype::kFloat32 ? recycle::codec_value_bytes(t.codec)
                                                 : recycle::dtype_value_bytes(t.dtype);
    // int8 adds a scale and an offset per channel (the first dimension) before the values.
    const size_t header = t.dtype == Dtype::kFloat32
                              ? recycle::codec_channel_bytes(t.codec) * recycle::channels_of(t.shape)
                              : 0;
    const size_t pb = static_cast<size_t>(n) * vb + header;
    FUZZ_CHECK(t.payload_bytes() == pb, "payload_bytes");
    FUZZ_CHECK(t.payload >= bytes.data() && t.payload <= body_end &&
                   pb <= static_cast<size_t>(body_end - t.payload),
               "payload outside the record body");
    if (expected_payload != nullptr) FUZZ_CHECK(t.payload == expected_payload, "payload gap");
    expected_payload = t.payload + pb;
    // An int8 payload's scales and offsets need not be what encoding its values would choose.
    if (t.dtype == Dtype::kFloat32 && t.codec == Codec::kInt8) canonical = false;
    FUZZ_CHECK(static_cast<uint8_t>(bytes[header_pos]) == static_cast<uint8_t>(t.dtype),
               "dtype byte");
    FUZZ_CHECK(t.dtype == Dtype::kFloat32 || bytes[header_pos + 1] == 0,
               "an exact tensor with a codec byte parsed");
    if (bytes[header_pos + 3] != 0) canonical = false;
    header_pos += 4 + 4 * t.shape.size();
    Decoded out;
    if (t.dtype == Dtype::kFloat32) {
      out.floats.resize(static_cast<size_t>(n));
      recycle::decode_tensor(t, out.floats.data());
      if (t.codec != Codec::kFp32) {
        for (float x : out.floats) canonical = canonical && !std::isnan(x);
      }
      if (t.codec == Codec::kInt8) {
        for (float x : out.floats) FUZZ_CHECK(std::isfinite(x), "an int8 value decoded to NaN or inf");
      }
    } else {
      out.exact.resize(static_cast<size_t>(n) * recycle::dtype_value_bytes(t.dtype));
      recycle::decode_exact(t, static_cast<void*>(out.exact.data()));
      if (t.dtype == Dtype::kBool) {
        for (char c : out.exact) FUZZ_CHECK(c == 0 || c == 1, "a bool decoded to another byte");
      }
    }
    values.push_back(std::move(out));
    // The layout this record was written for, its first dimension variable.
    recycle::TensorLayout tl{"t" + std::to_string(layout.size()), t.dtype, t.shape,
                             t.dtype == Dtype::kFloat32 ? recycle::codec_name(t.codec)
                                                        : recycle::kRawCodecName};
    if (!tl.shape.empty() && (layout.size() % 2 == 0)) tl.shape[0] = recycle::kVariableDim;
    layout.push_back(std::move(tl));
  }
  FUZZ_CHECK(tensors[0].payload == bytes.data() + header_pos, "first payload not after header");
  FUZZ_CHECK(expected_payload == body_end, "payloads do not end at the checksum");
  FUZZ_CHECK(recycle::check_layout(layout).ok(), "the layout of a parsed record is invalid");
  const recycle::Status fits = recycle::check_record_layout(tensors, layout);
  FUZZ_CHECK(fits.ok(), "a record does not fit its own layout: " + fits.to_string());
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].shape.empty() || layout[i].shape.back() == recycle::kVariableDim) continue;
    recycle::RecordLayout other = layout;
    other[i].shape.back() += 1;
    FUZZ_CHECK(recycle::check_record_layout(tensors, other).is_corruption(),
               "a record fits a layout with another fixed dimension");
    break;
  }
  if (!canonical) return;
  // Canonical: decoding then encoding must reproduce the record exactly.
  std::vector<recycle::TypedArrayRef> refs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const recycle::RecordTensor& t = tensors[i];
    refs.push_back({t.dtype, t.codec, t.shape,
                    t.dtype == Dtype::kFloat32 ? static_cast<const void*>(values[i].floats.data())
                                               : static_cast<const void*>(values[i].exact.data())});
  }
  const std::string again = recycle::encode_record(refs);
  FUZZ_CHECK(again == bytes, "decode + encode does not reproduce a canonical record");
}

// ---- 2. round trip ---------------------------------------------------------------------------

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  float value() {
    if (pos_ + 4 > size_) return static_cast<float>(pos_++ % 7) - 3.0f;
    float x;
    std::memcpy(&x, data_ + pos_, 4);
    pos_ += 4;
    return x;
  }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

// Decodes an exact tensor with the typed decode_exact and checks it gives back `want`.
template <typename T>
void expect_exact(const recycle::RecordTensor& t, const std::vector<T>& want) {
  std::vector<T> out(want.size());
  recycle::decode_exact(t, out.data());
  FUZZ_CHECK(out == want, recycle::dtype_name(t.dtype) + " values changed");
}

void round_trip(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const size_t n_tensors = 1 + in.byte() % 4;
  // Per tensor: a dtype (float32 twice as often, each with its codec), then a shape.
  std::vector<Dtype> dtypes(n_tensors);
  std::vector<Codec> codecs(n_tensors, Codec::kFp32);
  std::vector<std::vector<int64_t>> shapes(n_tensors);
  for (size_t i = 0; i < n_tensors; ++i) {
    const uint8_t kind = in.byte() % 8;
    dtypes[i] = kind < 4 ? Dtype::kFloat32 : static_cast<Dtype>(kind - 2);  // 4..7 -> 2..5
    if (dtypes[i] == Dtype::kFloat32) codecs[i] = static_cast<Codec>(1 + (mode + kind) % 3);
    const int rank = in.byte() % 5;
    for (int d = 0; d < rank; ++d) shapes[i].push_back(1 + in.byte() % 6);
  }
  // Bad shapes (mode bit 7): encode_record must refuse them with std::invalid_argument.
  if (mode & 0x80) {
    std::vector<int64_t> bad;
    switch (in.byte() % 5) {
      case 0: bad = {2, 0}; break;
      case 1: bad = {-3}; break;
      case 2: bad = {int64_t{1} << 31}; break;
      case 3: bad = std::vector<int64_t>(9, 1); break;
      case 4: bad = {std::numeric_limits<int64_t>::min()}; break;
    }
    shapes[in.byte() % n_tensors] = bad;
  }
  std::vector<std::vector<float>> floats(n_tensors);
  std::vector<std::vector<int64_t>> i64(n_tensors);
  std::vector<std::vector<int32_t>> i32(n_tensors);
  std::vector<std::vector<uint8_t>> u8(n_tensors);
  std::vector<std::unique_ptr<bool[]>> bools(n_tensors);
  std::vector<int64_t> numels(n_tensors);
  std::vector<recycle::TypedArrayRef> refs;
  bool valid = true;
  for (size_t i = 0; i < n_tensors; ++i) {
    int64_t numel = 1;
    for (int64_t d : shapes[i]) {
      if (d < 1 || d > INT32_MAX) valid = false;
      numel *= (d >= 1 && d <= 64) ? d : 1;  // no data is read for a refused shape
    }
    if (shapes[i].size() > 8) valid = false;
    numels[i] = numel;
    bools[i].reset(new bool[static_cast<size_t>(numel)]);
    for (int64_t k = 0; k < numel; ++k) {
      switch (dtypes[i]) {
        case Dtype::kFloat32: floats[i].push_back(in.value()); break;
        case Dtype::kInt64: {
          uint64_t v = 0;
          for (int b = 0; b < 8; ++b) v = (v << 8) | in.byte();
          i64[i].push_back(static_cast<int64_t>(v));
          break;
        }
        case Dtype::kInt32: {
          uint32_t v = 0;
          for (int b = 0; b < 4; ++b) v = (v << 8) | in.byte();
          i32[i].push_back(static_cast<int32_t>(v));
          break;
        }
        case Dtype::kUint8: u8[i].push_back(in.byte()); break;
        case Dtype::kBool: bools[i][k] = in.byte() & 1; break;
      }
    }
    switch (dtypes[i]) {
      case Dtype::kFloat32:
        refs.push_back(recycle::TypedArrayRef::floats(floats[i].data(), shapes[i], codecs[i]));
        break;
      case Dtype::kInt64:
        refs.push_back(recycle::TypedArrayRef::exact(i64[i].data(), shapes[i]));
        break;
      case Dtype::kInt32:
        refs.push_back(recycle::TypedArrayRef::exact(i32[i].data(), shapes[i]));
        break;
      case Dtype::kUint8:
        refs.push_back(recycle::TypedArrayRef::exact(u8[i].data(), shapes[i]));
        break;
      case Dtype::kBool:
        refs.push_back(recycle::TypedArrayRef::exact(bools[i].get(), shapes[i]));
        break;
    }
  }

  std::string record;
  try {
    record = recycle::encode_record(refs);
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(!valid, std::string("encode_record refused valid tensors: ") + e.what());
    return;
  } catch (const std::exception& e) {
    fail(std::string("encode_record threw ") + typeid(e).name() + ": " + e.what());
  }
  FUZZ_CHECK(valid, "encode_record accepted a bad shape");

  std::vector<recycle::RecordTensor> tensors;
  const recycle::Status st = recycle::parse_record(record, &tensors);
  FUZZ_CHECK(st.ok(), "parse of an encoded record: " + st.to_string());
  FUZZ_CHECK(tensors.size() == n_tensors, "tensor count changed");
  for (size_t i = 0; i < n_tensors; ++i) {
    FUZZ_CHECK(tensors[i].dtype == dtypes[i], "dtype changed");
    FUZZ_CHECK(tensors[i].shape == shapes[i], "shape changed");
    FUZZ_CHECK(tensors[i].numel() == numels[i], "numel changed");
    const size_t n = static_cast<size_t>(numels[i]);
    switch (dtypes[i]) {
      case Dtype::kFloat32: {
        FUZZ_CHECK(tensors[i].codec == codecs[i], "codec changed");
        std::vector<float> out(n);
        recycle::decode_tensor(tensors[i], out.data());
        for (size_t k = 0; k < n; ++k) {
          const float want = reference_round_trip(codecs[i], floats[i][k]);
          if (!same_value(out[k], want)) {
            char msg[160];
            std::snprintf(msg, sizeof msg,
                          "%s: 0x%08x -> 0x%08x, reference 0x%08x (tensor %zu, index %zu)",
                          recycle::codec_name(codecs[i]).c_str(), bits_of(floats[i][k]),
                          bits_of(out[k]), bits_of(want), i, k);
            fail(msg);
          }
        }
        break;
      }
      case Dtype::kInt64: expect_exact(tensors[i], i64[i]); break;
      case Dtype::kInt32: expect_exact(tensors[i], i32[i]); break;
      case Dtype::kUint8: expect_exact(tensors[i], u8[i]); break;
      case Dtype::kBool: {
        std::unique_ptr<bool[]> out(new bool[n]);
        recycle::decode_exact(tensors[i], out.get());
        for (size_t k = 0; k < n; ++k) FUZZ_CHECK(out[k] == bools[i][k], "bool values changed");
        break;
      }
    }
  }
  // Any truncation of a good record is corruption.
  const std::string_view view(record);
  const size_t cut = in.byte() % record.size();
  FUZZ_CHECK(recycle::parse_record(view.substr(0, cut), &tensors).is_corruption(),
             "a truncated record parsed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  parse_and_decode(raw, false);
  if (size >= 16) {
    // An exactly sized heap copy, so ASan sees any read past its end.
    std::vector<char> sealed(raw.begin(), raw.end());
    recycle::put_le64(sealed.data() + size - 8, XXH3_64bits(sealed.data(), size - 8));
    parse_and_decode(std::string_view(sealed.data(), sealed.size()), true);
  }
  round_trip(data, size);
  return 0;
}
