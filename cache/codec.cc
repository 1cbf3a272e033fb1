#include "cache/codec.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "base/coding.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RECYCLE_HAVE_F16C_PATH 1
#endif

namespace recycle {

namespace {

#ifdef RECYCLE_HAVE_F16C_PATH
// Eight values per instruction with F16C (every x86-64 CPU since 2012), chosen at run time.
// fp16 -> fp32 is exact; fp32 -> fp16 rounds to nearest even, as the scalar path does.
bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}

__attribute__((target("avx,f16c"))) size_t encode_fp16_f16c(const float* in, size_t n, char* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t decode_fp16_f16c(const char* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  return i;
}

// int8 decode, eight values per step with AVX2 (bytes -> int32 -> float, then mul and add:
// no FMA, so every value is bit for bit what the scalar loop gives).
bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

__attribute__((target("avx2"))) inline void decode_eight(const uint8_t* q, __m256 s, __m256 o,
                                                         float* out) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  _mm256_storeu_ps(out, _mm256_add_ps(o, _mm256_mul_ps(s, v)));
}

__attribute__((target("avx2"))) size_t decode_int8_avx2(const uint8_t* q, size_t n, float scale,
                                                        float offset, float* out) {
  if (n < 8) return 0;
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 o = _mm256_set1_ps(offset);
  auto eight = [&](size_t i) { decode_eight(q + i, s, o, out + i); };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    eight(i);
    eight(i + 8);
  }
  if (i + 8 <= n) {
    eight(i);
    i += 8;
  }
  // The last few values: one more vector that ends at n, writing again (the same floats) over
  // values already done.
  if (i < n) eight(n - 8);
  return n;
}

// Whether any of the first (n / 16) * 16 floats at `in` (any alignment) is not finite, 16 a
// step with AVX2; returns the values it looked at in *done.
__attribute__((target("avx2"))) bool any_float_not_finite_avx2(const char* in, size_t n,
                                                               size_t* done) {
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  __m256i bad0 = _mm256_setzero_si256(), bad1 = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 4 * i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 4 * i + 32));
    bad0 = _mm256_or_si256(bad0, _mm256_cmpeq_epi32(_mm256_and_si256(a, exponent), exponent));
    bad1 = _mm256_or_si256(bad1, _mm256_cmpeq_epi32(_mm256_and_si256(b, exponent), exponent));
  }
  *done = i;
  return !_mm256_testz_si256(_mm256_or_si256(bad0, bad1), _mm256_or_si256(bad0, bad1));
}
#endif

float float_of_le(const char* p) {
  const uint32_t bits = get_le32(p);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void put_float_le(char* p, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_le32(p, bits);
}

std::string number(float x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", static_cast<double>(x));
  return text;
}

// "NaN", "inf" or "-inf": a value that is not finite, as messages name it.
std::string not_finite_name(float x) { return std::isnan(x) ? "NaN" : x < 0 ? "-inf" : "inf"; }

// The refusal of value i of the n values `in` (not finite) by `codec` (int8: in `channel`, when
// given): every codec refuses such a value with this one line. What a cache stores is a frozen
// prefix's output, so that is where it came from.
CodecRangeError not_finite_error(Codec codec, const float* in, size_t n, size_t i,
                                 const std::string& channel = "") {
  return CodecRangeError(
      codec_name(codec) + " codec: value " + std::to_string(i) + " of " + std::to_string(n) +
          (channel.empty() ? "" : " (channel " + channel + ")") + " is " + not_finite_name(in[i]) +
          "; no codec stores values that are not finite: the prefix's output is not finite "
          "(an overflow under --precision bf16 or fp16, or its weights)",
      in[i]);
}

// Whether any of n floats (4 bytes each, any alignment) is not finite (exponent bits all
// ones): 16 a step with AVX2, the rest a branch-free scan the compiler vectorises (SSE2).
bool any_float_not_finite(const char* in, size_t n) {
  size_t i = 0;
#ifdef RECYCLE_HAVE_F16C_PATH
  if (cpu_has_avx2() && any_float_not_finite_avx2(in, n, &i)) return true;
#endif
  uint32_t bad = 0;
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, in + 4 * i, 4);
    bad |= static_cast<uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return bad != 0;
}

// The first of n values that is not finite (n when every one is).
size_t first_not_finite(const float* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(in[i])) return i;
  }
  return n;
}

constexpr size_t kInt8ChannelBytes = 8;  // scale:f32 offset:f32
constexpr float kInt8Levels = 255.0f;

void encode_int8(const float* in, size_t n, size_t channels, char* out) {
  const size_t per = channels == 0 ? 0 : n / channels;
  auto* q_out = reinterpret_cast<uint8_t*>(out + channels * kInt8ChannelBytes);
  for (size_t c = 0; c < channels; ++c) {
    const float* x = in + c * per;
    float lo = std::numeric_limits<float>::infinity();
    float hi = -lo;
    for (size_t i = 0; i < per; ++i) {
      if (!std::isfinite(x[i])) {
        throw not_finite_error(Codec::kInt8, in, n, c * per + i, std::to_string(c));
      }
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    if (per == 0) lo = hi = 0.0f;
    const double range = static_cast<double>(hi) - static_cast<double>(lo);
    if (range > std::numeric_limits<float>::max()) {
      throw CodecRangeError(
          "int8 codec: channel " + std::to_string(c) + " spans more than the float range; use fp32",
          std::fabs(hi) > std::fabs(lo) ? hi : lo);
    }
    float scale = static_cast<float>(range / kInt8Levels);
    // A range so small that range / 255 rounds to zero: the smallest scale still tells the
    // values apart (q <= 128 then).
    if (scale == 0.0f && range > 0) scale = std::numeric_limits<float>::denorm_min();
    // Near the top of the float range, lo + 255 * scale can round past it: step the scale
    // down until the largest code decodes to a finite value (check_payload insists on it).
    while (!std::isfinite(lo + kInt8Levels * scale)) scale = std::nextafter(scale, 0.0f);
    put_float_le(out + c * kInt8ChannelBytes, scale);
    put_float_le(out + c * kInt8ChannelBytes + 4, lo);
    // q is the nearest integer to (x - lo) / scale with the stored (float) scale, worked in
    // double so that the rounding is that of the exact quotient.
    const double inv = scale > 0 ? 1.0 / static_cast<double>(scale) : 0.0;
    uint8_t* q = q_out + c * per;
    for (size_t i = 0; i < per; ++i) {
      const double v = std::nearbyint((static_cast<double>(x[i]) - lo) * inv);
      q[i] = static_cast<uint8_t>(std::min(255.0, std::max(0.0, v)));
    }
  }
}

void decode_int8(const char* in, size_t n, size_t channels, float* out) {
  const size_t per = channels == 0 ? 0 : n / channels;
  const auto* q_in = reinterpret_cast<const uint8_t*>(in + channels * kInt8ChannelBytes);
  for (size_t c = 0; c < channels; ++c) {
    const float scale = float_of_le(in + c * kInt8ChannelBytes);
    const float offset = float_of_le(in + c * kInt8ChannelBytes + 4);
    const uint8_t* q = q_in + c * per;
    float* y = out + c * per;
    size_t i = 0;
#ifdef RECYCLE_HAVE_F16C_PATH
    if (cpu_has_avx2()) i = decode_int8_avx2(q, per, scale, offset, y);
#endif
    for (; i < per; ++i) y[i] = offset + scale * static_cast<float>(q[i]);
  }
}

// True when an fp16 or bf16 code is an infinity or a NaN (its exponent bits all ones).
bool half_not_finite(Codec codec, uint16_t bits) {
  const uint16_t exponent = codec == Codec::kFp16 ? 0x7C00 : 0x7F80;
  return (bits & exponent) == exponent;
}

// Whether any of n fp16 / bf16 codes is not finite: a branch-free scan the compiler vectorises.
bool any_half_not_finite(Codec codec, const char* in, size_t n) {
  const uint16_t exponent = codec == Codec::kFp16 ? 0x7C00 : 0x7F80;
  bool bad = false;
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    bad |= (bits & exponent) == exponent;
  }
  return bad;
}

void check_channels(size_t n, size_t channels, const char* what) {
  if (channels == 0 ? n != 0 : n % channels != 0) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(channels) +
                                " channels do not divide " + std::to_string(n) + " values");
  }
}

}  // namespace

std::string codec_name(Codec codec) {
  switch (codec) {
    case Codec::kFp32: return "fp32";
    case Codec::kFp16: return "fp16";
    case Codec::kBf16: return "bf16";
    case Codec::kInt8: return "int8";
  }
  return "unknown";
}

std::vector<std::string> codec_names() { return {"fp32", "fp16", "bf16", "int8"}; }

bool parse_codec(std::string_view name, Codec* out) {
  for (Codec c : {Codec::kFp32, Codec::kFp16, Codec::kBf16, Codec::kInt8}) {
    if (name == codec_name(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

bool codec_from_byte(uint8_t byte, Codec* out) {
  if (byte < static_cast<uint8_t>(Codec::kFp32) || byte > static_cast<uint8_t>(Codec::kInt8)) {
    return false;
  }
  *out = static_cast<Codec>(byte);
  return true;
}

size_t codec_value_bytes(Codec codec) {
  switch (codec) {
    case Codec::kFp32: return 4;
    case Codec::kFp16: return 2;
    case Codec::kBf16: return 2;
    case Codec::kInt8: return 1;
  }
  throw std::invalid_argument("codec_value_bytes: unknown codec");
}

size_t codec_channel_bytes(Codec codec) { return codec == Codec::kInt8 ? kInt8ChannelBytes : 0; }

size_t codec_payload_bytes(Codec codec, size_t n, size_t channels) {
  return n * codec_value_bytes(codec) + channels * codec_channel_bytes(codec);
}

void encode_values(Codec codec, const float* in, size_t n, char* out) {
  encode_values(codec, in, n, 1, out);
}

void decode_values(Codec codec, const char* in, size_t n, float* out) {
  decode_values(codec, in, n, 1, out);
}

void check_encoded_range(Codec codec, const float* in, size_t n, const char* out) {
  if (codec == Codec::kFp32) {
    if (!any_float_not_finite(out, n)) return;
    throw not_finite_error(codec, in, n, first_not_finite(in, n));
  }
  if (codec != Codec::kFp16 && codec != Codec::kBf16) return;
  if (!any_half_not_finite(codec, out, n)) return;
  const size_t bad = first_not_finite(in, n);
  if (bad < n) throw not_finite_error(codec, in, n, bad);
  // Every input is finite: one rounded past the codec's largest finite value.
  float largest = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(in[i]) > std::fabs(largest)) largest = in[i];
  }
  const std::string name = codec_name(codec);
  const float max_finite = codec == Codec::kFp16 ? 65504.0f : c10::detail::f32_from_bits(0x7F7F);
  throw CodecRangeError(
      name + " codec: the largest value, " + number(largest) + ", is beyond " + name +
          "'s largest finite value " + number(max_finite) +
          (codec == Codec::kFp16 ? "; use --codec bf16 or fp32" : "; use --codec fp32"),
      largest);
}

std::string check_values(Codec codec, const char* in, size_t n) {
  if (codec == Codec::kFp32) {
    if (!any_float_not_finite(in, n)) return "";
    for (size_t i = 0; i < n; ++i) {
      const float x = float_of_le(in + 4 * i);
      if (!std::isfinite(x)) {
        return "fp32 value " + std::to_string(i) + " of " + std::to_string(n) + " is " +
               not_finite_name(x);
      }
    }
    return "";
  }
  if (codec != Codec::kFp16 && codec != Codec::kBf16) return "";
  if (!any_half_not_finite(codec, in, n)) return "";
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    if (!half_not_finite(codec, bits)) continue;
    const bool nan = (bits & (codec == Codec::kFp16 ? 0x03FF : 0x007F)) != 0;
    return codec_name(codec) + " value " + std::to_string(i) + " of " + std::to_string(n) + " is " +
           (nan               ? "NaN"
            : (bits & 0x8000) ? "-inf"
                              : "inf");
  }
  return "";
}

std::string check_payload(Codec codec, const char* in, size_t channels) {
  if (codec != Codec::kInt8) return "";
  for (size_t c = 0; c < channels; ++c) {
    const float scale = float_of_le(in + c * kInt8ChannelBytes);
    const float offset = float_of_le(in + c * kInt8ChannelBytes + 4);
    // On the training hot path (parse_record): no allocation unless something is wrong.
    const bool good_scale = std::isfinite(scale) && scale >= 0;
    const bool good_offset = std::isfinite(offset);
    if (good_scale && good_offset && std::isfinite(offset + kInt8Levels * scale)) continue;
    const std::string which = "int8 channel " + std::to_string(c);
    if (!good_scale) return which + " has scale " + std::to_string(scale);
    if (!good_offset) return which + " has offset " + std::to_string(offset);
    return which + " decodes past the float range (offset " + std::to_string(offset) +
           ", scale " + std::to_string(scale) + ")";
  }
  return "";
}

void encode_values(Codec codec, const float* in, size_t n, size_t channels, char* out) {
  if (codec == Codec::kInt8) check_channels(n, channels, "encode_values");
  switch (codec) {
    case Codec::kInt8:
      encode_int8(in, n, channels, out);
      return;
    case Codec::kFp32:
      std::memcpy(out, in, n * sizeof(float));
      return;
    case Codec::kFp16: {
      size_t done = 0;
#ifdef RECYCLE_HAVE_F16C_PATH
      if (cpu_has_f16c()) done = encode_fp16_f16c(in, n, out);
#endif
      for (size_t i = done; i < n; ++i) {
        const uint16_t bits = c10::detail::fp16_ieee_from_fp32_value(in[i]);
        std::memcpy(out + 2 * i, &bits, 2);
      }
      return;
    }
    case Codec::kBf16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t bits = c10::detail::round_to_nearest_even(in[i]);
        std::memcpy(out + 2 * i, &bits, 2);
      }
      return;
  }
  throw std::invalid_argument("encode_values: unknown codec");
}

void decode_values(Codec codec, const char* in, size_t n, size_t channels, float* out) {
  if (codec == Codec::kInt8) check_channels(n, channels, "decode_values");
  switch (codec) {
    case Codec::kInt8:
      decode_int8(in, n, channels, out);
      return;
    case Codec::kFp32:
      std::memcpy(out, in, n * sizeof(float));
      return;
    case Codec::kFp16: {
      size_t done = 0;
#ifdef RECYCLE_HAVE_F16C_PATH
      if (cpu_has_f16c()) done = decode_fp16_f16c(in, n, out);
#endif
      for (size_t i = done; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, in + 2 * i, 2);
        out[i] = c10::detail::fp16_ieee_to_fp32_value(bits);
      }
      return;
    }
    case Codec::kBf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, in + 2 * i, 2);
        out[i] = c10::detail::f32_from_bits(bits);
      }
      return;
  }
  throw std::invalid_argument("decode_values: unknown codec");
}

}  // namespace recycle
