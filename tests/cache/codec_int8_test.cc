// Tests for the int8 codec (cache/codec.h): per-channel scale and offset, the error bound,
// constant channels, values it refuses, its payload inside a record (cache/record.h) and the
// corrupt int8 records parse_record refuses.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/codec.h"
#include "cache/record.h"
#include "recycle/status.h"
#include "tests/test_util.h"

namespace {

using recycle::Codec;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kFltMax = std::numeric_limits<float>::max();

float float_at(const char* p) {
  uint32_t bits = 0;
  for (int i = 3; i >= 0; --i) bits = (bits << 8) | static_cast<uint8_t>(p[i]);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void put_float(char* p, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((bits >> (8 * i)) & 0xFF);
}

std::vector<char> encode(const std::vector<float>& x, size_t channels) {
  std::vector<char> out(recycle::codec_payload_bytes(Codec::kInt8, x.size(), channels));
  recycle::encode_values(Codec::kInt8, x.data(), x.size(), channels, out.data());
  return out;
}

std::vector<float> decode(const std::vector<char>& payload, size_t n, size_t channels) {
  std::vector<float> out(n);
  recycle::decode_values(Codec::kInt8, payload.data(), n, channels, out.data());
  return out;
}

// Checks every channel of x against its int8 round trip: the stored scale is (max - min) /
// 255 and the offset the minimum, the minimum comes back exactly, and every value comes back
// within scale / 2, plus the float rounding of offset + scale * q (two roundings, each at
// most half an ulp of a number no larger than max(|min|, |max|) + range).
void expect_within_bound(const std::vector<float>& x, size_t channels) {
  const std::vector<char> payload = encode(x, channels);
  const std::vector<float> y = decode(payload, x.size(), channels);
  const size_t per = x.size() / channels;
  for (size_t c = 0; c < channels; ++c) {
    const float lo = *std::min_element(x.begin() + c * per, x.begin() + (c + 1) * per);
    const float hi = *std::max_element(x.begin() + c * per, x.begin() + (c + 1) * per);
    const float scale = float_at(payload.data() + 8 * c);
    const float offset = float_at(payload.data() + 8 * c + 4);
    EXPECT_EQ(offset, lo) << "channel " << c;
    // (max - min) / 255, but for a few ulps less at the top of the float range.
    const double want_scale = (static_cast<double>(hi) - lo) / 255.0;
    EXPECT_LE(scale, static_cast<float>(want_scale)) << c;
    EXPECT_GE(scale, want_scale * (1 - 1e-5) - std::numeric_limits<float>::denorm_min()) << c;
    const double slack =
        std::numeric_limits<float>::epsilon() *
            (std::max(std::fabs(lo), std::fabs(hi)) + (static_cast<double>(hi) - lo)) +
        std::numeric_limits<float>::denorm_min();  // subnormal products
    for (size_t i = c * per; i < (c + 1) * per; ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << i;
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), scale / 2.0 + slack)
          << "channel " << c << " index " << i << ": " << x[i] << " -> " << y[i]
          << " (scale " << scale << ")";
      if (x[i] == lo) {
        EXPECT_EQ(y[i], lo) << "the minimum comes back exactly, index " << i;
      }
    }
  }
}

std::string reseal(std::string record) {
  const size_t body = record.size() - 8;
  const uint64_t sum = XXH3_64bits(record.data(), body);
  for (int i = 0; i < 8; ++i) record[body + i] = static_cast<char>((sum >> (8 * i)) & 0xFF);
  return record;
}

std::string corruption_of(const std::string& bytes) {
  std::vector<recycle::RecordTensor> tensors;
  const recycle::Status st = recycle::parse_record(bytes, &tensors);
  if (!st.is_corruption()) return "<not corruption: " + st.to_string() + ">";
  return st.message();
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

}  // namespace

TEST(CodecInt8, NameByteAndSizes) {
  Codec c = Codec::kFp32;
  ASSERT_TRUE(recycle::parse_codec("int8", &c));
  EXPECT_EQ(c, Codec::kInt8);
  EXPECT_EQ(recycle::codec_name(Codec::kInt8), "int8");
  EXPECT_EQ(static_cast<int>(Codec::kInt8), 4);
  ASSERT_TRUE(recycle::codec_from_byte(4, &c));
  EXPECT_EQ(c, Codec::kInt8);
  EXPECT_EQ(recycle::codec_value_bytes(Codec::kInt8), 1u);
  EXPECT_EQ(recycle::codec_channel_bytes(Codec::kInt8), 8u);
  EXPECT_EQ(recycle::codec_payload_bytes(Codec::kInt8, 6272, 32), 6272u + 256u);
  // The others have no per-channel header: channels change nothing.
  for (Codec other : {Codec::kFp32, Codec::kFp16, Codec::kBf16}) {
    EXPECT_EQ(recycle::codec_channel_bytes(other), 0u);
    EXPECT_EQ(recycle::codec_payload_bytes(other, 6272, 32),
              6272u * recycle::codec_value_bytes(other));
  }
  // A [32, 14, 14] activation (the transfer task at 0.5 with width 16): about a quarter of
  // fp32.
  const double ratio = static_cast<double>(recycle::codec_payload_bytes(Codec::kInt8, 6272, 32)) /
                       static_cast<double>(recycle::codec_payload_bytes(Codec::kFp32, 6272, 32));
  EXPECT_NEAR(ratio, 0.26, 0.005);
}

TEST(CodecInt8, KnownPayloadBytes) {
  // Channel 0: 0, 0.5, ..., 127.5 (scale 0.5, offset 0, q = i). Channel 1: -1 and 254
  // (scale 1, offset -1).
  std::vector<float> x(2 * 256);
  for (int i = 0; i < 256; ++i) x[i] = 0.5f * static_cast<float>(i);
  for (int i = 0; i < 256; ++i) x[256 + i] = (i % 2 == 0) ? -1.0f : 254.0f;
  const std::vector<char> p = encode(x, 2);
  ASSERT_EQ(p.size(), 16u + 512u);
  EXPECT_EQ(float_at(p.data()), 0.5f);
  EXPECT_EQ(float_at(p.data() + 4), 0.0f);
  EXPECT_EQ(float_at(p.data() + 8), 1.0f);
  EXPECT_EQ(float_at(p.data() + 12), -1.0f);
  // scale then offset, little-endian: 0.5f = 0x3F000000.
  EXPECT_EQ(static_cast<uint8_t>(p[3]), 0x3F);
  EXPECT_EQ(static_cast<uint8_t>(p[0]), 0x00);
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(static_cast<uint8_t>(p[16 + i]), i) << i;
    EXPECT_EQ(static_cast<uint8_t>(p[16 + 256 + i]), (i % 2 == 0) ? 0 : 255) << i;
  }
  // These values are on the grid: they come back exactly.
  EXPECT_EQ(decode(p, x.size(), 2), x);
}

TEST(CodecInt8, ConstantChannelsComeBackExactly) {
  const std::vector<float> x = {3.25f, 3.25f, 3.25f,  0.0f, 0.0f, 0.0f,
                                -7.0f, -7.0f, -7.0f,  1.0f, 2.0f, 3.0f};
  const std::vector<char> p = encode(x, 4);
  for (size_t c = 0; c < 3; ++c) EXPECT_EQ(float_at(p.data() + 8 * c), 0.0f) << c;
  const std::vector<float> y = decode(p, x.size(), 4);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(y[i], x[i]) << i;
  EXPECT_FALSE(std::signbit(y[3]));
  expect_within_bound(x, 4);
  // One value per channel: every channel is constant, so everything is exact.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<float> one_each(37);
  for (float& v : one_each) v = normal(rng);
  EXPECT_EQ(decode(encode(one_each, 37), 37, 37), one_each);
}

TEST(CodecInt8, ErrorWithinHalfAScaleOnRandomShapesAndRanges) {
  std::mt19937 rng(8);
  std::uniform_int_distribution<int> rank(0, 4), dim(1, 9), kind(0, 3);
  std::uniform_real_distribution<float> center(-50.0f, 50.0f), spread(1e-6f, 1e3f);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> shape(static_cast<size_t>(rank(rng)));
    for (int64_t& d : shape) d = dim(rng);
    if (trial == 0) shape = {32, 14, 14};  // the transfer task's activation at 0.5
    const size_t channels = recycle::channels_of(shape);
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> x(n);
    const size_t per = n / channels;
    for (size_t c = 0; c < channels; ++c) {
      std::normal_distribution<float> normal(center(rng), spread(rng));
      const int k = kind(rng);
      for (size_t i = c * per; i < (c + 1) * per; ++i) {
        float v = normal(rng);
        if (k == 1) v = std::max(v, 0.0f);                       // after a ReLU: many zeros
        if (k == 2) v = static_cast<float>(static_cast<int>(v));  // few distinct values
        x[i] = v;
      }
    }
    SCOPED_TRACE("trial " + std::to_string(trial) + ", " + std::to_string(channels) +
                 " channels of " + std::to_string(per));
    expect_within_bound(x, channels);
    // The same through a record: shape, codec and values survive parse_record + decode_tensor.
    const std::string rec = recycle::encode_record(Codec::kInt8, {{x.data(), shape}});
    std::vector<recycle::RecordTensor> t;
    ASSERT_OK(recycle::parse_record(rec, &t));
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].codec, Codec::kInt8);
    EXPECT_EQ(t[0].shape, shape);
    EXPECT_EQ(t[0].payload_bytes(), n + 8 * channels);
    EXPECT_EQ(rec.size(), 8 + 4 + 4 * shape.size() + n + 8 * channels + 8);
    std::vector<float> from_record(n);
    recycle::decode_tensor(t[0], from_record.data());
    EXPECT_EQ(from_record, decode(encode(x, channels), n, channels));
  }
}

TEST(CodecInt8, ExtremeButFiniteRanges) {
  expect_within_bound({-1e38f, 1e38f, 0.0f, 5e37f}, 1);
  expect_within_bound({kFltMax, kFltMax, kFltMax * 0.5f, 0.0f}, 1);
  expect_within_bound({1e-40f, 2e-40f, 0.0f, 3e-42f}, 1);  // subnormal values
  // A range whose / 255 is below the smallest float: the values stay apart.
  const float tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> x = {0.0f, tiny, 2 * tiny, 0.0f};
  const std::vector<float> y = decode(encode(x, 1), 4, 1);
  EXPECT_EQ(y, x);
}

TEST(CodecInt8, DecodeMatchesTheScalarFormulaAtEveryLengthAndAlignment) {
  // The decode has a vector path of 8 values; lengths around it and odd alignments must give
  // offset + scale * q bit for bit.
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t per = 1; per <= 40; ++per) {
    for (size_t shift = 0; shift < 3; ++shift) {
      const size_t channels = 2;
      std::vector<char> buf(shift + 16 + channels * per);
      char* p = buf.data() + shift;
      const float scales[] = {0.0137f, 3.5f}, offsets[] = {-1.25f, 1e3f};
      for (size_t c = 0; c < channels; ++c) {
        put_float(p + 8 * c, scales[c]);
        put_float(p + 8 * c + 4, offsets[c]);
      }
      for (size_t i = 0; i < channels * per; ++i) p[16 + i] = static_cast<char>(byte(rng));
      std::vector<float> out(channels * per + 1, -99.0f);
      recycle::decode_values(Codec::kInt8, p, channels * per, channels, out.data());
      for (size_t c = 0; c < channels; ++c) {
        for (size_t i = 0; i < per; ++i) {
          const float q = static_cast<float>(static_cast<uint8_t>(p[16 + c * per + i]));
          const float want = offsets[c] + scales[c] * q;
          ASSERT_EQ(out[c * per + i], want) << "per " << per << " shift " << shift;
        }
      }
      EXPECT_EQ(out.back(), -99.0f) << "wrote past the end";
    }
  }
}

TEST(CodecInt8, NaNAndInfinityAreRefusedWithTheChannel) {
  for (float bad : {kNaN, -kNaN, kInf, -kInf}) {
    std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    x[4] = bad;
    std::vector<char> out(recycle::codec_payload_bytes(Codec::kInt8, 6, 3));
    try {
      recycle::encode_values(Codec::kInt8, x.data(), 6, 3, out.data());
      FAIL() << "encoded " << bad;
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      const std::string value = std::isnan(bad) ? "NaN" : bad < 0 ? "-inf" : "inf";
      EXPECT_TRUE(contains(what, "int8 codec: value 4 of 6 (channel 2) is " + value + "; no codec "
                                 "stores values that are not finite")) << what;
    }
    EXPECT_THROW(recycle::encode_record(Codec::kInt8, {{x.data(), {3, 2}}}),
                 std::invalid_argument);
  }
  // A range wider than the float range is refused too (max - min would be infinite).
  const float wide[] = {-3e38f, 3e38f};
  EXPECT_THROW(recycle::encode_record(Codec::kInt8, {{wide, {1, 2}}}), std::invalid_argument);
  // Channels must divide the values.
  std::vector<char> out(64);
  const float five[] = {1, 2, 3, 4, 5};
  EXPECT_THROW(recycle::encode_values(Codec::kInt8, five, 5, 2, out.data()),
               std::invalid_argument);
}

TEST(CodecInt8, RecordsOfOtherCodecsAreUnchangedByChannels) {
  // The 5-argument encode and decode of fp32, fp16 and bf16 ignore the channels.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(60);
  for (float& v : x) v = normal(rng);
  for (Codec c : {Codec::kFp32, Codec::kFp16, Codec::kBf16}) {
    std::vector<char> a(60 * recycle::codec_value_bytes(c)), b(a.size());
    recycle::encode_values(c, x.data(), 60, a.data());
    recycle::encode_values(c, x.data(), 60, 6, b.data());
    EXPECT_EQ(a, b) << recycle::codec_name(c);
  }
}

TEST(CodecInt8, MixedRecordWithExactTensors) {
  // A text-like record: [T, D] hidden states in int8 (one scale per position) and int64
  // lengths.
  std::vector<float> hidden(5 * 3);
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = std::sin(static_cast<float>(i)) * 4;
  const int64_t len[] = {5};
  const std::string rec = recycle::encode_record(
      {recycle::TypedArrayRef::floats(hidden.data(), {5, 3}, Codec::kInt8),
       recycle::TypedArrayRef::exact(len, {1})});
  std::vector<recycle::RecordTensor> t;
  ASSERT_OK(recycle::parse_record(rec, &t));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].payload_bytes(), 15u + 40u);
  EXPECT_EQ(t[1].payload, t[0].payload + 55);
  std::vector<float> h(15);
  recycle::decode_tensor(t[0], h.data());
  for (size_t i = 0; i < 15; ++i) EXPECT_NEAR(h[i], hidden[i], 8.0 / 255.0 / 2.0 + 1e-6) << i;
  int64_t back = 0;
  recycle::decode_exact(t[1], &back);
  EXPECT_EQ(back, 5);
}

TEST(CodecInt8, CorruptRecordsAreRefused) {
  const float x[] = {0.0f, 1.0f, 2.0f, 3.0f, -1.0f, 1.0f, 0.5f, 0.25f};
  const std::string rec = recycle::encode_record(Codec::kInt8, {{x, {2, 4}}});
  // Prefix 8, tensor header 4 + 2 dims x 4 = 12 (8..19), channel headers 20..35, q 36..43.
  ASSERT_EQ(rec.size(), 8u + 12u + 16u + 8u + 8u);
  std::vector<recycle::RecordTensor> t;
  ASSERT_OK(recycle::parse_record(rec, &t));

  // Truncated: every shorter length, sealed or not, is corruption.
  for (size_t len = 0; len < rec.size(); ++len) {
    EXPECT_NE(corruption_of(rec.substr(0, len)).rfind("<not", 0), 0u) << len;
    if (len >= 16) {
      EXPECT_NE(corruption_of(reseal(rec.substr(0, len))).rfind("<not", 0), 0u) << len;
    }
  }
  // The payload cut by one value but the checksum right: the sizes disagree.
  std::string cut = rec;
  cut.erase(43, 1);
  EXPECT_TRUE(contains(corruption_of(reseal(cut)), "payload is 23 bytes, header says 24"));

  // Scales and offsets that are not finite, a negative scale, or one that decodes past the
  // float range.
  struct Bad {
    size_t at;
    float value;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {20, kNaN, "int8 channel 0 has scale"},     {20, kInf, "int8 channel 0 has scale inf"},
      {28, -kInf, "int8 channel 1 has scale"},    {28, -0.5f, "int8 channel 1 has scale -0.5"},
      {24, kNaN, "int8 channel 0 has offset"},    {32, kInf, "int8 channel 1 has offset inf"},
      {20, kFltMax, "int8 channel 0 decodes past the float range"},
  };
  for (const Bad& b : bad) {
    std::string damaged = rec;
    put_float(&damaged[b.at], b.value);
    const std::string msg = corruption_of(reseal(damaged));
    EXPECT_TRUE(contains(msg, b.says)) << msg;
    EXPECT_TRUE(contains(msg, "record tensor 0")) << msg;
  }
  // A zero scale (a constant channel) and any q bytes are fine.
  std::string zero = rec;
  put_float(&zero[20], 0.0f);
  zero[36] = static_cast<char>(0xFF);
  ASSERT_OK(recycle::parse_record(reseal(zero), &t));
}
