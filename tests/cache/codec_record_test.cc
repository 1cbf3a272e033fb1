// Tests for cache/codec.h (fp32 exact; fp16 and bf16 round to nearest even; int8 in
// codec_int8_test.cc) and cache/record.h
// (encode_record / parse_record, and Corruption for any damaged record).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/util/Half.h>

#include "cache/codec.h"
#include "cache/record.h"
#include "recycle/status.h"
#include "tests/test_util.h"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The 2-byte code of one value (fp16 or bf16), read as a little-endian integer.
uint16_t encode_one(recycle::Codec codec, float x) {
  unsigned char out[2];
  recycle::encode_values(codec, &x, 1, reinterpret_cast<char*>(out));
  return static_cast<uint16_t>(out[0] | (out[1] << 8));
}

float decode_one(recycle::Codec codec, uint16_t bits) {
  const char in[2] = {static_cast<char>(bits & 0xFF), static_cast<char>(bits >> 8)};
  float out = 0;
  recycle::decode_values(codec, in, 1, &out);
  return out;
}

float round_trip(recycle::Codec codec, float x) { return decode_one(codec, encode_one(codec, x)); }

// Both half-width codecs keep the sign of zero, keep infinities and keep NaN a NaN.
void expect_signed_zeros_infinities_and_nan(recycle::Codec c) {
  SCOPED_TRACE(recycle::codec_name(c));
  const float zero = round_trip(c, 0.0f);
  EXPECT_EQ(zero, 0.0f);
  EXPECT_FALSE(std::signbit(zero));
  const float neg_zero = round_trip(c, -0.0f);
  EXPECT_EQ(neg_zero, 0.0f);
  EXPECT_TRUE(std::signbit(neg_zero));
  EXPECT_EQ(round_trip(c, kInf), kInf);
  EXPECT_EQ(round_trip(c, -kInf), -kInf);
  EXPECT_TRUE(std::isnan(round_trip(c, kNaN)));
  EXPECT_TRUE(std::isnan(round_trip(c, -kNaN)));
}

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

std::vector<float> random_floats(std::mt19937* rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(*rng);
  return v;
}

// Rewrites the trailing checksum so that only the deliberate damage is left to find.
std::string reseal(std::string record) {
  const size_t body = record.size() - 8;
  const uint64_t sum = XXH3_64bits(record.data(), body);
  for (int i = 0; i < 8; ++i) record[body + i] = static_cast<char>((sum >> (8 * i)) & 0xFF);
  return record;
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// The Corruption message parse_record gives for `bytes`, or a description of what it gave.
std::string corruption_of(const std::string& bytes) {
  std::vector<recycle::RecordTensor> tensors;
  const recycle::Status st = recycle::parse_record(bytes, &tensors);
  if (!st.is_corruption()) return "<not corruption: " + st.to_string() + ">";
  return st.message();
}

// A small record of two fp16 tensors, shapes {2} and {1, 3}: 46 bytes.
std::string small_record() {
  const float a[] = {1.5f, -2.0f};
  const float b[] = {0.25f, 3.0f, -7.5f};
  return recycle::encode_record(recycle::Codec::kFp16, {{a, {2}}, {b, {1, 3}}});
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Codec

TEST(Codec, NamesRoundTrip) {
  EXPECT_EQ(recycle::codec_names(), (std::vector<std::string>{"fp32", "fp16", "bf16", "int8"}));
  const std::vector<std::pair<recycle::Codec, std::string>> all = {{recycle::Codec::kFp32, "fp32"},
                                                                   {recycle::Codec::kFp16, "fp16"},
                                                                   {recycle::Codec::kBf16, "bf16"},
                                                                   {recycle::Codec::kInt8, "int8"}};
  for (const auto& [codec, name] : all) {
    EXPECT_EQ(recycle::codec_name(codec), name);
    recycle::Codec parsed = recycle::Codec::kFp32;
    ASSERT_TRUE(recycle::parse_codec(name, &parsed)) << name;
    EXPECT_EQ(parsed, codec);
    recycle::Codec from_byte = recycle::Codec::kFp32;
    ASSERT_TRUE(recycle::codec_from_byte(static_cast<uint8_t>(codec), &from_byte));
    EXPECT_EQ(from_byte, codec);
  }
  EXPECT_EQ(static_cast<int>(recycle::Codec::kFp32), 1);
  EXPECT_EQ(static_cast<int>(recycle::Codec::kFp16), 2);
  EXPECT_EQ(static_cast<int>(recycle::Codec::kBf16), 3);
  EXPECT_EQ(recycle::codec_value_bytes(recycle::Codec::kFp32), 4u);
  EXPECT_EQ(recycle::codec_value_bytes(recycle::Codec::kFp16), 2u);
  EXPECT_EQ(recycle::codec_value_bytes(recycle::Codec::kBf16), 2u);
}

TEST(Codec, RejectsUnknownNamesAndBytes) {
  for (const char* name : {"", "FP32", "fp 16", "fp16 ", "float16", "INT8", "int4", "fp8", "bf"}) {
    recycle::Codec c = recycle::Codec::kBf16;
    EXPECT_FALSE(recycle::parse_codec(name, &c)) << name;
  }
  for (int byte : {0, 5, 6, 128, 255}) {
    recycle::Codec c = recycle::Codec::kBf16;
    EXPECT_FALSE(recycle::codec_from_byte(static_cast<uint8_t>(byte), &c)) << byte;
    EXPECT_EQ(c, recycle::Codec::kBf16) << "left alone for byte " << byte;
  }
}

TEST(Codec, Fp32IsExactBitForBit) {
  std::mt19937 rng(21);
  std::vector<float> in(1000);
  for (float& x : in) x = float_of(static_cast<uint32_t>(rng()));  // any bits, NaNs included
  in[0] = 0.0f;
  in[1] = -0.0f;
  in[2] = kInf;
  in[3] = std::numeric_limits<float>::denorm_min();
  // Unaligned on both sides.
  std::vector<char> buf(in.size() * 4 + 1);
  recycle::encode_values(recycle::Codec::kFp32, in.data(), in.size(), buf.data() + 1);
  EXPECT_EQ(std::memcmp(buf.data() + 1, in.data(), in.size() * 4), 0);
  std::vector<float> out(in.size());
  recycle::decode_values(recycle::Codec::kFp32, buf.data() + 1, in.size(), out.data());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(bits_of(out[i]), bits_of(in[i])) << i;
  // Little-endian bytes: 1.0f is 00 00 80 3f.
  const float one = 1.0f;
  char b[4];
  recycle::encode_values(recycle::Codec::kFp32, &one, 1, b);
  EXPECT_EQ(std::string(b, 4), std::string("\x00\x00\x80\x3f", 4));
}

TEST(Codec, Fp16KnownValues) {
  const recycle::Codec c = recycle::Codec::kFp16;
  EXPECT_EQ(encode_one(c, 1.0f), 0x3C00);
  EXPECT_EQ(encode_one(c, -2.0f), 0xC000);
  EXPECT_EQ(encode_one(c, 0.5f), 0x3800);
  EXPECT_EQ(encode_one(c, 65504.0f), 0x7BFF);  // the largest finite half
  EXPECT_EQ(encode_one(c, 0.0f), 0x0000);
  EXPECT_EQ(encode_one(c, -0.0f), 0x8000);
  EXPECT_EQ(encode_one(c, kInf), 0x7C00);
  EXPECT_EQ(encode_one(c, -kInf), 0xFC00);
  EXPECT_EQ(encode_one(c, std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(encode_one(c, std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  // Round to nearest, ties to even.
  EXPECT_EQ(encode_one(c, 1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(encode_one(c, 1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(encode_one(c, 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_EQ(encode_one(c, std::ldexp(1.0f, -25)), 0x0000);  // a tie between 0 and 2^-24
  EXPECT_EQ(encode_one(c, 1.5f * std::ldexp(1.0f, -25)), 0x0001);
  EXPECT_EQ(encode_one(c, std::ldexp(1.0f, -27)), 0x0000);
  EXPECT_EQ(encode_one(c, -std::ldexp(1.0f, -27)), 0x8000);

  EXPECT_EQ(decode_one(c, 0x3C00), 1.0f);
  EXPECT_EQ(decode_one(c, 0x7BFF), 65504.0f);
  EXPECT_EQ(decode_one(c, 0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(decode_one(c, 0x3555), (1.0f + 0x155 / 1024.0f) * 0.25f);
  // Little-endian bytes: 1.0 is 00 3c.
  const float one = 1.0f;
  char b[2];
  recycle::encode_values(c, &one, 1, b);
  EXPECT_EQ(std::string(b, 2), std::string("\x00\x3c", 2));
}

TEST(Codec, Fp16ZerosInfinitiesNaNAndOverflow) {
  const recycle::Codec c = recycle::Codec::kFp16;
  expect_signed_zeros_infinities_and_nan(c);
  const uint16_t nan_bits = encode_one(c, kNaN);
  EXPECT_EQ(nan_bits & 0x7C00, 0x7C00);
  EXPECT_NE(nan_bits & 0x03FF, 0);
  // Overflow: past the midpoint between 65504 and 2^16 (65520) values become infinite.
  EXPECT_EQ(round_trip(c, 65519.0f), 65504.0f);
  EXPECT_EQ(round_trip(c, 65520.0f), kInf);
  EXPECT_EQ(round_trip(c, 70000.0f), kInf);
  EXPECT_EQ(round_trip(c, 1e6f), kInf);
  EXPECT_EQ(round_trip(c, -1e6f), -kInf);
  EXPECT_EQ(round_trip(c, std::numeric_limits<float>::max()), kInf);
  EXPECT_EQ(round_trip(c, std::numeric_limits<float>::lowest()), -kInf);
}

TEST(Codec, Fp16RandomNormalRangeWithinTolerance) {
  std::mt19937 rng(22);
  std::uniform_real_distribution<float> log2_mag(-14.0f, 15.99f);
  const recycle::Codec c = recycle::Codec::kFp16;
  for (int i = 0; i < 20000; ++i) {
    const float x = (rng() & 1 ? -1.0f : 1.0f) * std::exp2(log2_mag(rng));
    if (std::fabs(x) > 65504.0f) continue;
    const uint16_t code = encode_one(c, x);
    const float y = decode_one(c, code);
    ASSERT_LE(std::fabs(y - x), 1e-3f * std::fabs(x)) << x;
    ASSERT_EQ(std::signbit(y), std::signbit(x)) << x;
    // Nearest: the neighbouring codes are no closer.
    if ((code & 0x7FFF) < 0x7BFF) {
      ASSERT_GE(std::fabs(decode_one(c, code + 1) - x), std::fabs(y - x)) << x;
    }
    if ((code & 0x7FFF) > 0x0400) {
      ASSERT_GE(std::fabs(decode_one(c, code - 1) - x), std::fabs(y - x)) << x;
    }
    // Decoded values are representable: encoding them again is exact.
    ASSERT_EQ(encode_one(c, y), code) << x;
  }
  // Subnormal halves: absolute error at most half the smallest step, 2^-25.
  std::uniform_real_distribution<float> small(0.0f, std::ldexp(1.0f, -14));
  for (int i = 0; i < 2000; ++i) {
    const float x = small(rng);
    ASSERT_LE(std::fabs(round_trip(c, x) - x), std::ldexp(1.0f, -25)) << x;
  }
}

TEST(Codec, Bf16KnownValues) {
  const recycle::Codec c = recycle::Codec::kBf16;
  EXPECT_EQ(encode_one(c, 1.0f), 0x3F80);
  EXPECT_EQ(encode_one(c, -2.0f), 0xC000);
  EXPECT_EQ(encode_one(c, 0.0f), 0x0000);
  EXPECT_EQ(encode_one(c, -0.0f), 0x8000);
  EXPECT_EQ(encode_one(c, kInf), 0x7F80);
  EXPECT_EQ(encode_one(c, -kInf), 0xFF80);
  // Round to nearest, ties to even.
  EXPECT_EQ(encode_one(c, 1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(encode_one(c, 1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(encode_one(c, 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  // bf16 keeps fp32's range: 1e30 is finite, the largest bf16 stays, FLT_MAX rounds up to inf.
  EXPECT_EQ(encode_one(c, float_of(0x7F7F0000)), 0x7F7F);
  EXPECT_EQ(round_trip(c, std::numeric_limits<float>::max()), kInf);
  EXPECT_NEAR(round_trip(c, 1e30f), 1e30f, 1e28f);
  EXPECT_EQ(decode_one(c, 0x3F80), 1.0f);
  EXPECT_EQ(decode_one(c, 0x4049), float_of(0x40490000));
  const float one = 1.0f;
  char b[2];
  recycle::encode_values(c, &one, 1, b);
  EXPECT_EQ(std::string(b, 2), std::string("\x80\x3f", 2));
}

TEST(Codec, Bf16ZerosInfinitiesNaN) {
  const recycle::Codec c = recycle::Codec::kBf16;
  expect_signed_zeros_infinities_and_nan(c);
  // A NaN whose payload sits only in the low 16 bits must not turn into infinity.
  EXPECT_TRUE(std::isnan(round_trip(c, float_of(0x7F800001))));
}

TEST(Codec, Bf16RandomValuesWithinTolerance) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> log2_mag(-120.0f, 120.0f);
  const recycle::Codec c = recycle::Codec::kBf16;
  for (int i = 0; i < 20000; ++i) {
    const float x = (rng() & 1 ? -1.0f : 1.0f) * std::exp2(log2_mag(rng));
    const uint16_t code = encode_one(c, x);
    const float y = decode_one(c, code);
    ASSERT_LE(std::fabs(y - x), 1e-2f * std::fabs(x)) << x;
    ASSERT_EQ(std::signbit(y), std::signbit(x)) << x;
    ASSERT_GE(std::fabs(decode_one(c, code + 1) - x), std::fabs(y - x)) << x;
    ASSERT_GE(std::fabs(decode_one(c, code - 1) - x), std::fabs(y - x)) << x;
    ASSERT_EQ(encode_one(c, y), code) << x;
  }
}

TEST(Codec, ArraysAtAnyAlignment) {
  std::mt19937 rng(24);
  const std::vector<float> in = random_floats(&rng, 257);
  for (recycle::Codec c : {recycle::Codec::kFp16, recycle::Codec::kBf16}) {
    std::vector<char> buf(in.size() * 2 + 3);
    for (size_t shift : {0, 1, 3}) {
      recycle::encode_values(c, in.data(), in.size(), buf.data() + shift);
      std::vector<float> out(in.size() + 1, 123.0f);
      recycle::decode_values(c, buf.data() + shift, in.size(), out.data());
      for (size_t i = 0; i < in.size(); ++i) {
        ASSERT_EQ(bits_of(out[i]), bits_of(round_trip(c, in[i]))) << i;
      }
      EXPECT_EQ(out[in.size()], 123.0f) << "decode writes exactly n values";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Record

TEST(Record, OneTensorRoundTripAndLayout) {
  const float v[] = {1.0f, -2.0f, 0.5f, 3.25f, -0.0f, 100.0f};
  const std::string rec = recycle::encode_record(recycle::Codec::kFp16, {{v, {2, 3}}});
  // prefix 8, tensor header 4 + 2 dims x 4, payload 6 x 2, checksum 8.
  ASSERT_EQ(rec.size(), 8u + 12u + 12u + 8u);
  EXPECT_EQ(rec.substr(0, 8), std::string("RCR\x01\x01\x00\x00\x00", 8));
  EXPECT_EQ(rec.substr(8, 12), std::string("\x01\x02\x02\x00\x02\x00\x00\x00\x03\x00\x00\x00", 12));
  EXPECT_EQ(rec.substr(20, 2), std::string("\x00\x3c", 2));  // 1.0 in fp16
  uint64_t sum = 0;
  for (int i = 7; i >= 0; --i) sum = (sum << 8) | static_cast<uint8_t>(rec[32 + i]);
  EXPECT_EQ(sum, XXH3_64bits(rec.data(), 32));

  std::vector<recycle::RecordTensor> tensors;
  ASSERT_OK(recycle::parse_record(rec, &tensors));
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].codec, recycle::Codec::kFp16);
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensors[0].numel(), 6);
  EXPECT_EQ(tensors[0].payload, rec.data() + 20);
  float out[6];
  recycle::decode_tensor(tensors[0], out);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(bits_of(out[i]), bits_of(v[i])) << i;  // all exact halves
}

TEST(Record, ThreeTensorsOfDifferentShapesRoundTrip) {
  std::mt19937 rng(31);
  const std::vector<std::vector<int64_t>> shapes = {{5}, {2, 3, 4}, {1, 1, 7}};
  std::vector<std::vector<float>> values;
  std::vector<recycle::FloatArrayRef> refs;
  for (const auto& s : shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    values.push_back(random_floats(&rng, static_cast<size_t>(n)));
  }
  for (size_t i = 0; i < shapes.size(); ++i) refs.push_back({values[i].data(), shapes[i]});
  for (recycle::Codec c : {recycle::Codec::kFp32, recycle::Codec::kFp16, recycle::Codec::kBf16}) {
    const std::string rec = recycle::encode_record(c, refs);
    const size_t vb = recycle::codec_value_bytes(c);
    const size_t header = 8 + (4 + 4) + (4 + 12) + (4 + 12);
    ASSERT_EQ(rec.size(), header + (5 + 24 + 7) * vb + 8) << recycle::codec_name(c);
    std::vector<recycle::RecordTensor> tensors;
    ASSERT_OK(recycle::parse_record(rec, &tensors));
    ASSERT_EQ(tensors.size(), 3u);
    size_t offset = header;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(tensors[i].codec, c);
      EXPECT_EQ(tensors[i].shape, shapes[i]);
      EXPECT_EQ(tensors[i].payload, rec.data() + offset);
      offset += values[i].size() * vb;
      std::vector<float> out(values[i].size());
      recycle::decode_tensor(tensors[i], out.data());
      for (size_t j = 0; j < out.size(); ++j) {
        const float expected =
            c == recycle::Codec::kFp32 ? values[i][j] : round_trip(c, values[i][j]);
        ASSERT_EQ(bits_of(out[j]), bits_of(expected)) << recycle::codec_name(c) << " " << i;
      }
    }
  }
}

TEST(Record, ScalarRank8And255Tensors) {
  const float x = 4.0f;
  std::vector<recycle::RecordTensor> tensors;
  const std::string scalar = recycle::encode_record(recycle::Codec::kFp32, {{&x, {}}});
  ASSERT_OK(recycle::parse_record(scalar, &tensors));
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_TRUE(tensors[0].shape.empty());
  EXPECT_EQ(tensors[0].numel(), 1);
  float back = 0;
  recycle::decode_tensor(tensors[0], &back);
  EXPECT_EQ(back, 4.0f);

  std::vector<float> v(256, 1.0f);
  const std::string rank8 =
      recycle::encode_record(recycle::Codec::kBf16, {{v.data(), {2, 2, 2, 2, 2, 2, 2, 2}}});
  ASSERT_OK(recycle::parse_record(rank8, &tensors));
  EXPECT_EQ(tensors[0].shape, std::vector<int64_t>(8, 2));

  std::vector<recycle::FloatArrayRef> many(255, {&x, {1}});
  const std::string rec = recycle::encode_record(recycle::Codec::kFp16, many);
  ASSERT_OK(recycle::parse_record(rec, &tensors));
  EXPECT_EQ(tensors.size(), 255u);
}

TEST(Record, EncodeRejectsBadInput) {
  const std::vector<float> v(512, 1.0f);
  const recycle::Codec c = recycle::Codec::kFp32;
  EXPECT_THROW(recycle::encode_record(c, {}), std::invalid_argument);
  EXPECT_THROW(recycle::encode_record(c, {{v.data(), std::vector<int64_t>(9, 2)}}),
               std::invalid_argument);
  EXPECT_THROW(recycle::encode_record(c, {{v.data(), {2}}, {v.data(), std::vector<int64_t>(9, 1)}}),
               std::invalid_argument);
  EXPECT_THROW(recycle::encode_record(c, std::vector<recycle::FloatArrayRef>(256, {v.data(), {1}})),
               std::invalid_argument);
  EXPECT_THROW(recycle::encode_record(c, {{v.data(), {0}}}), std::invalid_argument);
  EXPECT_THROW(recycle::encode_record(c, {{v.data(), {3, -1}}}), std::invalid_argument);
  EXPECT_THROW(recycle::encode_record(c, {{v.data(), {int64_t{1} << 31}}}), std::invalid_argument);
}

TEST(Record, EverySingleBitFlipIsCorruption) {
  const std::string rec = small_record();
  ASSERT_EQ(rec.size(), 46u);
  std::vector<recycle::RecordTensor> tensors;
  ASSERT_OK(recycle::parse_record(rec, &tensors));
  for (size_t offset = 0; offset < rec.size(); ++offset) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = rec;
      bad[offset] = static_cast<char>(bad[offset] ^ (1 << bit));
      const recycle::Status st = recycle::parse_record(bad, &tensors);
      ASSERT_TRUE(st.is_corruption())
          << "offset " << offset << " bit " << bit << ": " << st.to_string();
    }
  }
}

TEST(Record, BitFlipsInALargerRecordAreCorruption) {
  std::mt19937 rng(32);
  const std::vector<float> a = random_floats(&rng, 3 * 16);
  const std::vector<float> b = random_floats(&rng, 40);
  const std::string rec =
      recycle::encode_record(recycle::Codec::kFp32, {{a.data(), {3, 16}}, {b.data(), {40}}});
  std::vector<recycle::RecordTensor> tensors;
  for (size_t offset = 0; offset < rec.size(); ++offset) {
    std::string bad = rec;
    bad[offset] = static_cast<char>(bad[offset] ^ (1 << (offset % 8)));
    ASSERT_TRUE(recycle::parse_record(bad, &tensors).is_corruption()) << offset;
  }
}

TEST(Record, TruncationAtEveryLengthIsCorruption) {
  const std::string rec = small_record();
  for (size_t len = 0; len < rec.size(); ++len) {
    const std::string msg = corruption_of(rec.substr(0, len));
    EXPECT_EQ(msg.find("<not corruption"), std::string::npos) << len << ": " << msg;
    if (len < 16) {
      EXPECT_TRUE(contains(msg, "too short")) << len;
    } else {
      EXPECT_TRUE(contains(msg, "checksum")) << len;
    }
  }
  EXPECT_TRUE(contains(corruption_of(rec + '\0'), "checksum"));
  EXPECT_TRUE(contains(corruption_of(""), "0 bytes"));
}

TEST(Record, WrongMagicIsCorruption) {
  const std::string rec = small_record();
  for (size_t i = 0; i < 3; ++i) {
    std::string bad = rec;
    bad[i] = 'X';
    EXPECT_TRUE(contains(corruption_of(bad), "magic")) << i;
    EXPECT_TRUE(contains(corruption_of(reseal(bad)), "magic")) << i;
  }
  EXPECT_TRUE(contains(corruption_of(std::string(46, '\0')), "magic"));
}

TEST(Record, BadVersionIsCorruption) {
  const std::string rec = small_record();
  for (int version : {0, 2, 255}) {
    std::string bad = rec;
    bad[3] = static_cast<char>(version);
    const std::string msg = corruption_of(reseal(bad));
    EXPECT_TRUE(contains(msg, "version " + std::to_string(version))) << msg;
  }
}

TEST(Record, BadHeadersWithValidChecksumAreCorruption) {
  const std::string rec = small_record();
  // Offsets: prefix 0-7, tensor 0 header 8-15 (dtype 8, codec 9, ndim 10, dim 12-15),
  // tensor 1 header 16-27 (dims 20-23 and 24-27), payload 28-37, checksum 38-45.
  auto with = [&](size_t offset, uint8_t value) {
    std::string bad = rec;
    bad[offset] = static_cast<char>(value);
    return reseal(bad);
  };
  EXPECT_TRUE(contains(corruption_of(with(4, 0)), "no tensors"));
  EXPECT_FALSE(contains(corruption_of(with(4, 3)), "<not corruption"));  // one tensor too many
  EXPECT_FALSE(contains(corruption_of(with(4, 1)), "<not corruption"));  // one too few
  EXPECT_TRUE(contains(corruption_of(with(8, 2)), "dtype"));
  EXPECT_TRUE(contains(corruption_of(with(9, 0)), "codec"));
  EXPECT_TRUE(contains(corruption_of(with(9, 5)), "codec"));
  EXPECT_TRUE(
      contains(corruption_of(with(9, 4)), "is 10 bytes, header says 24"));  // int8: 2 + 2 x 8
  EXPECT_TRUE(contains(corruption_of(with(10, 9)), "rank"));
  EXPECT_TRUE(contains(corruption_of(with(12, 0)), "bad dimension"));
  EXPECT_TRUE(contains(corruption_of(with(27, 0x80)), "bad dimension"));             // 2^31 + 3
  EXPECT_TRUE(contains(corruption_of(with(24, 4)), "is 10 bytes, header says 12"));  // {1, 4}
  EXPECT_TRUE(contains(corruption_of(with(26, 1)), "larger than the record"));
  EXPECT_FALSE(contains(corruption_of(with(9, 1)), "<not corruption"));   // fp32 needs more bytes
  EXPECT_FALSE(contains(corruption_of(with(18, 3)), "<not corruption"));  // ndim 2 -> 3
}

// The fp16 codec may take a vectorised path (F16C); it must give the same bits as c10's
// scalar conversions, for every half-precision pattern and for floats around every boundary.
TEST(Codec, Fp16MatchesScalarReferenceBitForBit) {
  std::vector<char> halves(2 * 65536 + 2 * 3);  // a tail not a multiple of 8
  for (uint32_t h = 0; h < 65536 + 3; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h & 0xFFFF);
    std::memcpy(halves.data() + 2 * h, &bits, 2);
  }
  const size_t n = halves.size() / 2;
  std::vector<float> decoded(n);
  recycle::decode_values(recycle::Codec::kFp16, halves.data(), n, decoded.data());
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, halves.data() + 2 * i, 2);
    const float want = c10::detail::fp16_ieee_to_fp32_value(bits);
    uint32_t a, b;
    std::memcpy(&a, &decoded[i], 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << "half bits " << bits;
  }

  std::mt19937 rng(7);
  std::vector<float> floats;
  for (int i = 0; i < 100003; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) floats.push_back(f);  // NaN payloads may differ; NaN-ness is tested above
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.99f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 1e-9f,
                  std::numeric_limits<float>::infinity()}) {
    floats.push_back(f);
    floats.push_back(-f);
  }
  std::vector<char> encoded(2 * floats.size());
  recycle::encode_values(recycle::Codec::kFp16, floats.data(), floats.size(), encoded.data());
  for (size_t i = 0; i < floats.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, encoded.data() + 2 * i, 2);
    ASSERT_EQ(got, c10::detail::fp16_ieee_from_fp32_value(floats[i])) << floats[i];
  }
}

// ---------------------------------------------------------------------------------------------
// Records of several dtypes

namespace {

// The bytes of a version-1 record as the code before named tensors wrote them, built by hand:
// float32 tensors only, one codec, zero padding.
std::string old_record_by_hand(uint8_t codec, const std::vector<std::vector<uint32_t>>& shapes,
                               const std::string& payload) {
  std::string r = {'R', 'C', 'R', 1, static_cast<char>(shapes.size()), 0, 0, 0};
  for (const auto& shape : shapes) {
    r += {1, static_cast<char>(codec), static_cast<char>(shape.size()), 0};
    for (uint32_t d : shape) {
      for (int i = 0; i < 4; ++i) r.push_back(static_cast<char>((d >> (8 * i)) & 0xFF));
    }
  }
  r += payload;
  const uint64_t sum = XXH3_64bits(r.data(), r.size());
  for (int i = 0; i < 8; ++i) r.push_back(static_cast<char>((sum >> (8 * i)) & 0xFF));
  return r;
}

std::string le_bytes(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

}  // namespace

TEST(Record, OldVersion1BytesStillParseAndAreWhatEncodeWrites) {
  // fp32 {2}: 1.0, -2.0.
  const std::string fp32 =
      old_record_by_hand(1, {{2}}, le_bytes(0x3F800000, 4) + le_bytes(0xC0000000, 4));
  std::vector<recycle::RecordTensor> tensors;
  ASSERT_OK(recycle::parse_record(fp32, &tensors));
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].dtype, recycle::Dtype::kFloat32);
  EXPECT_EQ(tensors[0].codec, recycle::Codec::kFp32);
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{2}));
  float out[2];
  recycle::decode_tensor(tensors[0], out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  const float v[] = {1.0f, -2.0f};
  EXPECT_EQ(recycle::encode_record(recycle::Codec::kFp32, {{v, {2}}}), fp32);
  EXPECT_EQ(recycle::encode_record({recycle::TypedArrayRef::floats(v, {2}, recycle::Codec::kFp32)}),
            fp32);

  // fp16, two tensors {2} and {1, 3}: small_record(), byte for byte.
  const std::string payload = le_bytes(0x3E00, 2) + le_bytes(0xC000, 2) +  // 1.5, -2
                              le_bytes(0x3400, 2) + le_bytes(0x4200, 2) + le_bytes(0xC780, 2);
  const std::string fp16 = old_record_by_hand(2, {{2}, {1, 3}}, payload);
  EXPECT_EQ(small_record(), fp16);
  ASSERT_OK(recycle::parse_record(fp16, &tensors));
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[1].dtype, recycle::Dtype::kFloat32);
  EXPECT_EQ(tensors[1].codec, recycle::Codec::kFp16);
  EXPECT_EQ(tensors[1].shape, (std::vector<int64_t>{1, 3}));
  float b[3];
  recycle::decode_tensor(tensors[1], b);
  EXPECT_EQ(b[0], 0.25f);
  EXPECT_EQ(b[1], 3.0f);
  EXPECT_EQ(b[2], -7.5f);
}

TEST(Record, DtypeNamesAndBytes) {
  const std::vector<std::pair<recycle::Dtype, std::string>> all = {
      {recycle::Dtype::kFloat32, "float32"}, {recycle::Dtype::kInt64, "int64"},
      {recycle::Dtype::kInt32, "int32"},     {recycle::Dtype::kUint8, "uint8"},
      {recycle::Dtype::kBool, "bool"}};
  const size_t bytes[] = {4, 8, 4, 1, 1};
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& [dtype, name] = all[i];
    EXPECT_EQ(static_cast<int>(dtype), static_cast<int>(i) + 1);
    EXPECT_EQ(recycle::dtype_name(dtype), name);
    recycle::Dtype parsed = recycle::Dtype::kBool;
    ASSERT_TRUE(recycle::parse_dtype(name, &parsed)) << name;
    EXPECT_EQ(parsed, dtype);
    ASSERT_TRUE(recycle::dtype_from_byte(static_cast<uint8_t>(i + 1), &parsed));
    EXPECT_EQ(parsed, dtype);
    EXPECT_EQ(recycle::dtype_value_bytes(dtype), bytes[i]);
  }
  recycle::Dtype d = recycle::Dtype::kInt64;
  for (const char* bad : {"", "float", "Float32", "int8", "raw", "fp16"}) {
    EXPECT_FALSE(recycle::parse_dtype(bad, &d)) << bad;
  }
  for (int byte : {0, 6, 7, 255}) EXPECT_FALSE(recycle::dtype_from_byte(byte, &d)) << byte;
  EXPECT_EQ(d, recycle::Dtype::kInt64) << "left alone on failure";
}

TEST(Record, ExactDtypesRoundTripExactly) {
  const int64_t i64[] = {0, 1, -1, INT64_MIN, INT64_MAX, -1234567890123, 4096};
  const int32_t i32[] = {0, -1, INT32_MIN, INT32_MAX, 77, -77};
  std::vector<uint8_t> u8(256);
  for (int i = 0; i < 256; ++i) u8[i] = static_cast<uint8_t>(i);
  const bool mask[] = {true, false, false, true, true};
  const std::string rec = recycle::encode_record(
      {recycle::TypedArrayRef::exact(i64, {7}), recycle::TypedArrayRef::exact(i32, {2, 3}),
       recycle::TypedArrayRef::exact(u8.data(), {16, 16}),
       recycle::TypedArrayRef::exact(mask, {5})});
  const size_t header = 8 + (4 + 4) + (4 + 8) + (4 + 8) + (4 + 4);
  ASSERT_EQ(rec.size(), header + 7 * 8 + 6 * 4 + 256 + 5 + 8);
  // Exact tensors carry codec byte 0; payloads are little-endian two's complement.
  EXPECT_EQ(rec.substr(8, 4), std::string("\x02\x00\x01\x00", 4));
  EXPECT_EQ(rec.substr(header + 3 * 8, 8), le_bytes(static_cast<uint64_t>(INT64_MIN), 8));
  EXPECT_EQ(rec.substr(header + 2 * 8, 8), std::string(8, '\xFF'));  // -1
  EXPECT_EQ(rec.substr(header + 56 + 256 + 24, 5), std::string("\x01\x00\x00\x01\x01", 5));

  std::vector<recycle::RecordTensor> tensors;
  ASSERT_OK(recycle::parse_record(rec, &tensors));
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_EQ(tensors[0].dtype, recycle::Dtype::kInt64);
  EXPECT_EQ(tensors[1].dtype, recycle::Dtype::kInt32);
  EXPECT_EQ(tensors[2].dtype, recycle::Dtype::kUint8);
  EXPECT_EQ(tensors[3].dtype, recycle::Dtype::kBool);
  EXPECT_EQ(tensors[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensors[0].payload_bytes(), 56u);
  EXPECT_EQ(tensors[3].payload_bytes(), 5u);

  std::vector<int64_t> back64(7);
  recycle::decode_exact(tensors[0], back64.data());
  EXPECT_EQ(back64, std::vector<int64_t>(std::begin(i64), std::end(i64)));
  std::vector<int32_t> back32(6);
  recycle::decode_exact(tensors[1], back32.data());
  EXPECT_EQ(back32, std::vector<int32_t>(std::begin(i32), std::end(i32)));
  std::vector<uint8_t> back8(256);
  recycle::decode_exact(tensors[2], back8.data());
  EXPECT_EQ(back8, u8);
  bool back_mask[5];
  recycle::decode_exact(tensors[3], back_mask);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back_mask[i], mask[i]) << i;
  // The untyped form writes the tensor's own type.
  std::vector<int64_t> untyped(7);
  recycle::decode_exact(tensors[0], static_cast<void*>(untyped.data()));
  EXPECT_EQ(untyped, back64);
}

// Records read one after another into one vector (as CachedBatches does for every sample)
// reuse its tensors' shape memory, and nothing of the record before shows through: not its
// codec (an exact tensor where a float one was), nor its rank, nor its count.
TEST(Record, AReusedVectorKeepsItsShapesMemoryAndNothingOfTheRecordBefore) {
  const std::vector<float> hidden(24, 0.5f);
  const int64_t length[] = {2, 3};
  const std::string mixed = recycle::encode_record(
      {recycle::TypedArrayRef::floats(hidden.data(), {2, 3, 4}, recycle::Codec::kFp16),
       recycle::TypedArrayRef::exact(length, {2})});
  const std::string swapped = recycle::encode_record(
      {recycle::TypedArrayRef::exact(length, {2}),
       recycle::TypedArrayRef::floats(hidden.data(), {4, 6}, recycle::Codec::kInt8)});
  const std::string single = recycle::encode_record(recycle::Codec::kFp32, {{hidden.data(), {24}}});

  std::vector<recycle::RecordTensor> tensors;
  ASSERT_OK(recycle::parse_record(mixed, &tensors));
  const int64_t* shape0 = tensors[0].shape.data();

  ASSERT_OK(recycle::parse_record(swapped, &tensors));
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].dtype, recycle::Dtype::kInt64);
  EXPECT_EQ(tensors[0].codec, recycle::Codec::kFp32);  // what an exact tensor reports
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(tensors[0].shape.data(), shape0);  // the rank-3 shape's memory, reused
  EXPECT_EQ(tensors[1].dtype, recycle::Dtype::kFloat32);
  EXPECT_EQ(tensors[1].codec, recycle::Codec::kInt8);
  EXPECT_EQ(tensors[1].shape, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(tensors[0].payload, swapped.data() + 8 + 8 + 12);
  EXPECT_EQ(tensors[1].payload, tensors[0].payload + 16);
  const int64_t* shape1 = tensors[1].shape.data();  // grown from rank 1 to 2

  // Both tensors have now held their largest shape: nothing is allocated again.
  ASSERT_OK(recycle::parse_record(mixed, &tensors));
  EXPECT_EQ(tensors[0].shape.data(), shape0);
  EXPECT_EQ(tensors[1].shape.data(), shape1);
  EXPECT_EQ(tensors[0].codec, recycle::Codec::kFp16);

  ASSERT_OK(recycle::parse_record(single, &tensors));
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(tensors[0].payload, single.data() + 8 + 8);
}

TEST(Record, MixedRecordOfActivationLengthsAndMask) {
  // A text encoder's record: hidden states fp16, the token count, a padding mask.
  const std::vector<float> hidden = {0.5f, -1.0f, 2.0f, 0.25f, -0.125f, 8.0f};
  const int64_t length[] = {2};
  const bool mask[] = {true, true, false};
  const std::string rec = recycle::encode_record(
      {recycle::TypedArrayRef::floats(hidden.data(), {3, 2}, recycle::Codec::kFp16),
       recycle::TypedArrayRef::exact(length, {1}), recycle::TypedArrayRef::exact(mask, {3})});
  std::vector<recycle::RecordTensor> tensors;
  ASSERT_OK(recycle::parse_record(rec, &tensors));
  ASSERT_EQ(tensors.size(), 3u);
  EXPECT_EQ(tensors[0].dtype, recycle::Dtype::kFloat32);
  EXPECT_EQ(tensors[0].codec, recycle::Codec::kFp16);
  EXPECT_EQ(tensors[0].payload_bytes(), 12u);
  EXPECT_EQ(tensors[1].payload, tensors[0].payload + 12);
  EXPECT_EQ(tensors[2].payload, tensors[1].payload + 8);
  std::vector<float> h(6);
  recycle::decode_tensor(tensors[0], h.data());
  EXPECT_EQ(h, hidden);  // all exact halves
  int64_t n = 0;
  recycle::decode_exact(tensors[1], &n);
  EXPECT_EQ(n, 2);
  bool m[3];
  recycle::decode_exact(tensors[2], m);
  EXPECT_TRUE(m[0] && m[1] && !m[2]);

  // Decoding with the wrong function or type is refused, not reinterpreted.
  EXPECT_THROW(recycle::decode_tensor(tensors[1], h.data()), std::invalid_argument);
  EXPECT_THROW(recycle::decode_exact(tensors[0], static_cast<void*>(h.data())),
               std::invalid_argument);
  int32_t wrong[3];
  EXPECT_THROW(recycle::decode_exact(tensors[1], wrong), std::invalid_argument);
  EXPECT_THROW(recycle::decode_exact(tensors[2], wrong), std::invalid_argument);

  // Every bit flip is corruption, and so is every truncation.
  for (size_t offset = 0; offset < rec.size(); ++offset) {
    std::string bad = rec;
    bad[offset] = static_cast<char>(bad[offset] ^ (1 << (offset % 8)));
    ASSERT_TRUE(recycle::parse_record(bad, &tensors).is_corruption()) << offset;
    ASSERT_TRUE(recycle::parse_record(std::string_view(rec).substr(0, offset), &tensors)
                    .is_corruption())
        << offset;
  }
}

TEST(Record, BadDtypeAndCodecBytesWithValidChecksumAreCorruption) {
  const int64_t v[] = {5, -5};
  const std::string rec = recycle::encode_record({recycle::TypedArrayRef::exact(v, {2})});
  // Offsets: tensor header 8-11 (dtype 8, codec 9, ndim 10), dim 12-15, payload 16-31.
  auto with = [&](size_t offset, uint8_t value) {
    std::string bad = rec;
    bad[offset] = static_cast<char>(value);
    return reseal(bad);
  };
  for (uint8_t dtype : {0, 6, 9, 255}) {
    const std::string msg = corruption_of(with(8, dtype));
    EXPECT_TRUE(contains(msg, "unknown dtype " + std::to_string(dtype))) << msg;
  }
  for (uint8_t codec : {1, 2, 3, 200}) {
    const std::string msg = corruption_of(with(9, codec));
    EXPECT_TRUE(contains(msg, "int64")) << msg;
    EXPECT_TRUE(contains(msg, "codec byte " + std::to_string(codec))) << msg;
  }
  // int64 -> int32 or uint8: the payload no longer fits the header.
  EXPECT_TRUE(contains(corruption_of(with(8, 3)), "payload is 16 bytes, header says 8"));
  EXPECT_TRUE(contains(corruption_of(with(8, 4)), "payload is 16 bytes, header says 2"));
  // A float32 tensor needs a codec.
  const float f[] = {1.0f, 2.0f};
  std::string fl = recycle::encode_record(recycle::Codec::kFp32, {{f, {2}}});
  fl[9] = 0;
  EXPECT_TRUE(contains(corruption_of(reseal(fl)), "unknown codec 0"));
  // A bool byte other than 0 or 1.
  const bool b[] = {true, false, true};
  std::string bools = recycle::encode_record({recycle::TypedArrayRef::exact(b, {3})});
  ASSERT_EQ(bools.size(), 8u + 8u + 3u + 8u);
  bools[17] = 2;
  EXPECT_TRUE(contains(corruption_of(reseal(bools)), "bool with a byte other than 0 or 1"));
}

TEST(Record, EncodeRejectsUnknownDtypeOrCodec) {
  const float f[] = {1.0f};
  recycle::TypedArrayRef bad_dtype = recycle::TypedArrayRef::floats(f, {1}, recycle::Codec::kFp32);
  bad_dtype.dtype = static_cast<recycle::Dtype>(9);
  EXPECT_THROW(recycle::encode_record({bad_dtype}), std::invalid_argument);
  recycle::TypedArrayRef bad_codec = recycle::TypedArrayRef::floats(f, {1}, recycle::Codec::kFp32);
  bad_codec.codec = static_cast<recycle::Codec>(0);
  EXPECT_THROW(recycle::encode_record({bad_codec}), std::invalid_argument);
  const int64_t v[] = {1};
  EXPECT_THROW(recycle::encode_record({recycle::TypedArrayRef::exact(v, {0})}),
               std::invalid_argument);
  EXPECT_THROW(
      recycle::encode_record({recycle::TypedArrayRef::exact(v, std::vector<int64_t>(9, 1))}),
      std::invalid_argument);
  // An exact tensor ignores the codec field: it is stored raw.
  recycle::TypedArrayRef exact = recycle::TypedArrayRef::exact(v, {1});
  exact.codec = recycle::Codec::kBf16;
  const std::string rec = recycle::encode_record({exact});
  EXPECT_EQ(rec[9], 0);
}

// ---------------------------------------------------------------------------------------------
// Values a record's codec cannot store

namespace {

// encode_record's refusal, as CodecRangeError's message ("" when it encodes).
std::string refusal(recycle::Codec codec, std::vector<float> values) {
  try {
    recycle::encode_record(codec, {recycle::FloatArrayRef{values.data(),
                                                          {static_cast<int64_t>(values.size())}}});
  } catch (const recycle::CodecRangeError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

// fp16 stores values up to 65504: one that rounds past it (65520 and up) or is not finite is
// refused with the largest value named and bf16 or fp32 suggested, instead of being stored as
// an infinity (which made training's loss NaN).
TEST(Codec, Fp16RecordsRefuseValuesBeyondItsRange) {
  using recycle::Codec;
  EXPECT_EQ(refusal(Codec::kFp16, {1.0f, 65504.0f, -65519.0f}), "");  // -65519 rounds to -65504
  std::string what = refusal(Codec::kFp16, {1.0f, -3.0f, 123456.0f, 70000.0f, 2.0f, 5.0f, 6.0f,
                                            7.0f, 8.0f, 9.0f});  // the F16C path too
  EXPECT_TRUE(has(what, "fp16 codec: the largest value, 123456, is beyond fp16's largest finite "
                        "value 65504; use --codec bf16 or fp32")) << what;
  what = refusal(Codec::kFp16, {0.0f, -65520.0f});
  EXPECT_TRUE(has(what, "the largest value, -65520,")) << what;
  EXPECT_TRUE(has(refusal(Codec::kFp16, {1.0f, kInf}), "fp16 codec: value 1 of 2 is inf;"))
      << "inf";
  EXPECT_TRUE(has(refusal(Codec::kFp16, {1.0f, kNaN, 1e9f}), "value 1 of 3 is NaN;")) << "NaN";
  try {
    std::vector<float> v(16, 1.0f);
    v[9] = -1e6f;
    recycle::encode_record(Codec::kFp16, {recycle::FloatArrayRef{v.data(), {4, 4}}});
    ADD_FAILURE() << "no CodecRangeError";
  } catch (const recycle::CodecRangeError& e) {
    EXPECT_EQ(e.largest(), -1e6f);
  }
}

// bf16 keeps fp32's range but not infinities or NaN; int8 refuses them as CodecRangeError too.
TEST(Codec, Bf16AndInt8RecordsRefuseValuesThatAreNotFinite) {
  using recycle::Codec;
  EXPECT_EQ(refusal(Codec::kBf16, {1e30f, -123456.0f}), "");
  EXPECT_TRUE(has(refusal(Codec::kBf16, {1.0f, -kInf}), "bf16 codec: value 1 of 2 is -inf;"))
      << "-inf";
  EXPECT_TRUE(has(refusal(Codec::kBf16, {kNaN}), "bf16 codec: value 0 of 1 is NaN;")) << "NaN";
  EXPECT_TRUE(has(refusal(Codec::kBf16, {std::numeric_limits<float>::max()}),
                  "beyond bf16's largest finite value"));
  EXPECT_TRUE(
      has(refusal(Codec::kInt8, {1.0f, kNaN}), "int8 codec: value 1 of 2 (channel 1) is NaN;"));
  EXPECT_EQ(refusal(Codec::kInt8, {1e30f, -1e30f}), "");
}

// fp32 refuses a NaN or an infinity as the other codecs do (issue 54: it stored them, a cache of
// an overflowing bf16-autocast prefix was all NaN, verify called it clean and training blamed
// --lr), with one line naming the tensor, the value and the prefix's output; every finite
// value, the largest, the smallest and subnormals included, is stored bit for bit.
TEST(Codec, Fp32RecordsRefuseValuesThatAreNotFinite) {
  using recycle::Codec;
  const float max = std::numeric_limits<float>::max();
  const std::vector<float> finite = {max, -max, std::numeric_limits<float>::denorm_min(),
                                     -std::numeric_limits<float>::min(), 0.0f, -0.0f, 1e30f};
  EXPECT_EQ(refusal(Codec::kFp32, finite), "");
  EXPECT_EQ(refusal(Codec::kFp32, {kInf, kNaN, 1e30f}),
            "tensor 0: fp32 codec: value 0 of 3 is inf; no codec stores values that are not "
            "finite: the prefix's output is not finite (an overflow under --precision bf16 or "
            "fp16, or its weights)");
  EXPECT_TRUE(has(refusal(Codec::kFp32, {1.0f, -kInf}), "fp32 codec: value 1 of 2 is -inf;"));
  EXPECT_TRUE(has(refusal(Codec::kFp32, {1.0f, 2.0f, -kNaN}), "fp32 codec: value 2 of 3 is NaN;"));
  // Anywhere in a long run (the vectorised scan, 16 values a step, and its tail), and
  // largest() is the value.
  for (int64_t n : {6272, 6283}) {
    for (int64_t at : {int64_t{0}, int64_t{7}, int64_t{8}, int64_t{1000}, n - 12, n - 1}) {
      std::vector<float> v(n, 0.5f);
      v[at] = kNaN;
      try {
        recycle::encode_record(Codec::kFp32, {recycle::FloatArrayRef{v.data(), {n}}});
        ADD_FAILURE() << "stored a NaN at " << at;
      } catch (const recycle::CodecRangeError& e) {
        EXPECT_TRUE(has(e.what(), "value " + std::to_string(at) + " of " + std::to_string(n) +
                                      " is NaN"))
            << e.what();
        EXPECT_TRUE(std::isnan(e.largest()));
      }
    }
  }
  // A record of several tensors names the one refused, by name when it is given.
  std::vector<float> ok(4, 1.0f), bad = {1.0f, kInf};
  const int64_t length = 2;
  auto hidden = recycle::TypedArrayRef::floats(bad.data(), {2}, Codec::kFp32);
  hidden.name = "hidden";
  try {
    recycle::encode_record({recycle::TypedArrayRef::floats(ok.data(), {4}, Codec::kFp32), hidden,
                            recycle::TypedArrayRef::exact(&length, {})});
    ADD_FAILURE() << "stored an infinity";
  } catch (const recycle::CodecRangeError& e) {
    EXPECT_TRUE(has(e.what(), "tensor 'hidden': fp32 codec: value 1 of 2 is inf;")) << e.what();
  }
  hidden.name = {};
  try {
    recycle::encode_record({recycle::TypedArrayRef::floats(ok.data(), {4}, Codec::kFp32), hidden});
    ADD_FAILURE() << "stored an infinity";
  } catch (const recycle::CodecRangeError& e) {
    EXPECT_TRUE(has(e.what(), "tensor 1: fp32 codec:")) << e.what();
  }
}

// What verify reads of a payload: every fp32, fp16 or bf16 value that is not finite is named
// (fp32's check found nothing before issue 54).
TEST(Codec, CheckValuesNamesAValueThatIsNotFinite) {
  using recycle::Codec;
  std::vector<float> v(1000, 0.25f);
  std::vector<char> payload(v.size() * 4 + 1);
  for (Codec codec : {Codec::kFp32, Codec::kFp16, Codec::kBf16}) {
    recycle::encode_values(codec, v.data(), v.size(), payload.data() + 1);  // unaligned
    EXPECT_EQ(recycle::check_values(codec, payload.data() + 1, v.size()), "");
  }
  for (float bad : {kNaN, kInf, -kInf}) {
    v[613] = bad;
    for (Codec codec : {Codec::kFp32, Codec::kFp16, Codec::kBf16}) {
      recycle::encode_values(codec, v.data(), v.size(), payload.data() + 1);
      const std::string want = recycle::codec_name(codec) + " value 613 of 1000 is " +
                               (std::isnan(bad) ? "NaN" : bad < 0 ? "-inf" : "inf");
      EXPECT_EQ(recycle::check_values(codec, payload.data() + 1, v.size()), want);
    }
  }
}
