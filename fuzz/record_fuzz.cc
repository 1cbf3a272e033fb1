// libFuzzer harness for the record format (cache/record.h) and the codecs (cache/codec.h).
//
// 1. parse_record on the raw input and on the input "resealed" (its last 8 bytes replaced by
//    the right XXH3-64, so the fuzzer gets past the checksum into the header checks). When a
//    parse is OK: every payload lies inside the body, decode_tensor fills exactly numel floats
//    (ASan checks the bounds), and when the record is canonical (one codec, zero padding, no
//    NaN in a 16-bit payload) encoding the decoded values gives back the same bytes.
// 2. A round trip: the input is read as a codec, a list of shapes and float values;
//    encode_record, parse_record (must be OK with the same shapes), decode_tensor, and every
//    value must equal an independent reference of fp32 / fp16 / bf16 rounding (round to
//    nearest even; NaN stays NaN). Inputs with a bad shape must give std::invalid_argument.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <xxhash.h>

#include "cache/codec.h"
#include "cache/record.h"
#include "fuzz/fuzz_util.h"

namespace {

using recycle::Codec;
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
  }
  fail("unknown codec");
}

bool same_value(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return bits_of(got) == bits_of(want);
}

// ---- 1. parsing arbitrary bytes ------------------------------------------------------------

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
  std::vector<std::vector<float>> values;
  for (const recycle::RecordTensor& t : tensors) {
    FUZZ_CHECK(t.shape.size() <= 8, "rank over 8");
    for (int64_t d : t.shape) FUZZ_CHECK(d >= 1 && d <= INT32_MAX, "bad dimension");
    const int64_t n = t.numel();
    const size_t vb = recycle::codec_value_bytes(t.codec);
    FUZZ_CHECK(t.payload >= bytes.data() && t.payload <= body_end &&
                   static_cast<size_t>(n) * vb <= static_cast<size_t>(body_end - t.payload),
               "payload outside the record body");
    if (expected_payload != nullptr) FUZZ_CHECK(t.payload == expected_payload, "payload gap");
    expected_payload = t.payload + n * vb;
    if (bytes[header_pos + 3] != 0 || t.codec != tensors[0].codec) canonical = false;
    header_pos += 4 + 4 * t.shape.size();
    std::vector<float> out(static_cast<size_t>(n));
    recycle::decode_tensor(t, out.data());
    if (t.codec != Codec::kFp32) {
      for (float x : out) canonical = canonical && !std::isnan(x);
    }
    values.push_back(std::move(out));
  }
  FUZZ_CHECK(tensors[0].payload == bytes.data() + header_pos, "first payload not after header");
  FUZZ_CHECK(expected_payload == body_end, "payloads do not end at the checksum");
  if (!canonical) return;
  // Canonical: decoding then encoding must reproduce the record exactly.
  std::vector<recycle::FloatArrayRef> refs;
  for (size_t i = 0; i < tensors.size(); ++i) refs.push_back({values[i].data(), tensors[i].shape});
  const std::string again = recycle::encode_record(tensors[0].codec, refs);
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

void round_trip(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const Codec codec = static_cast<Codec>(1 + mode % 3);
  const size_t n_tensors = 1 + in.byte() % 4;
  std::vector<std::vector<int64_t>> shapes(n_tensors);
  for (auto& shape : shapes) {
    const int rank = in.byte() % 5;
    for (int d = 0; d < rank; ++d) shape.push_back(1 + in.byte() % 6);
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
  std::vector<std::vector<float>> values(n_tensors);
  std::vector<recycle::FloatArrayRef> refs;
  bool valid = true;
  for (size_t i = 0; i < n_tensors; ++i) {
    int64_t numel = 1;
    for (int64_t d : shapes[i]) {
      if (d < 1 || d > INT32_MAX) valid = false;
      numel *= (d >= 1 && d <= 64) ? d : 1;  // no data is read for a refused shape
    }
    if (shapes[i].size() > 8) valid = false;
    for (int64_t k = 0; k < numel; ++k) values[i].push_back(in.value());
    refs.push_back({values[i].data(), shapes[i]});
  }

  std::string record;
  try {
    record = recycle::encode_record(codec, refs);
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
    FUZZ_CHECK(tensors[i].codec == codec, "codec changed");
    FUZZ_CHECK(tensors[i].shape == shapes[i], "shape changed");
    std::vector<float> out(values[i].size());
    FUZZ_CHECK(tensors[i].numel() == static_cast<int64_t>(out.size()), "numel changed");
    recycle::decode_tensor(tensors[i], out.data());
    for (size_t k = 0; k < out.size(); ++k) {
      const float want = reference_round_trip(codec, values[i][k]);
      if (!same_value(out[k], want)) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "%s: 0x%08x -> 0x%08x, reference 0x%08x (tensor %zu, index %zu)",
                      recycle::codec_name(codec).c_str(), bits_of(values[i][k]), bits_of(out[k]),
                      bits_of(want), i, k);
        fail(msg);
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
    const uint64_t sum = XXH3_64bits(sealed.data(), size - 8);
    for (int i = 0; i < 8; ++i) sealed[size - 8 + i] = static_cast<char>((sum >> (8 * i)) & 0xFF);
    parse_and_decode(std::string_view(sealed.data(), sealed.size()), true);
  }
  round_trip(data, size);
  return 0;
}
