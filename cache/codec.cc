#include "cache/codec.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstring>
#include <stdexcept>

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
#endif

}  // namespace

std::string codec_name(Codec codec) {
  switch (codec) {
    case Codec::kFp32: return "fp32";
    case Codec::kFp16: return "fp16";
    case Codec::kBf16: return "bf16";
  }
  return "unknown";
}

std::vector<std::string> codec_names() { return {"fp32", "fp16", "bf16"}; }

bool parse_codec(std::string_view name, Codec* out) {
  for (Codec c : {Codec::kFp32, Codec::kFp16, Codec::kBf16}) {
    if (name == codec_name(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

bool codec_from_byte(uint8_t byte, Codec* out) {
  if (byte < static_cast<uint8_t>(Codec::kFp32) || byte > static_cast<uint8_t>(Codec::kBf16)) {
    return false;
  }
  *out = static_cast<Codec>(byte);
  return true;
}

size_t codec_value_bytes(Codec codec) { return codec == Codec::kFp32 ? 4 : 2; }

void encode_values(Codec codec, const float* in, size_t n, char* out) {
  switch (codec) {
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

void decode_values(Codec codec, const char* in, size_t n, float* out) {
  switch (codec) {
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
