// Tests for base/coding.h: known byte patterns for each width and order, round trips over
// edge values, appends to strings, unaligned reads, and unsigned-char input.
#include "base/coding.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

}  // namespace

TEST(Coding, KnownBytePatterns) {
  std::string s;
  recycle::put_le32(&s, 0x01020304u);
  EXPECT_EQ(s, bytes({0x04, 0x03, 0x02, 0x01}));
  s.clear();
  recycle::put_be32(&s, 0x01020304u);
  EXPECT_EQ(s, bytes({0x01, 0x02, 0x03, 0x04}));
  s.clear();
  recycle::put_le64(&s, 0x0102030405060708ull);
  EXPECT_EQ(s, bytes({0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
  s.clear();
  recycle::put_be64(&s, 0x0102030405060708ull);
  EXPECT_EQ(s, bytes({0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}));
  // High bytes survive (no sign extension on the way back).
  const std::string ff = bytes({0xFF, 0xFE, 0x80, 0x7F, 0x00, 0x01, 0x81, 0xF0});
  EXPECT_EQ(recycle::get_le32(ff.data()), 0x7F80FEFFu);
  EXPECT_EQ(recycle::get_be32(ff.data()), 0xFFFE807Fu);
  EXPECT_EQ(recycle::get_le64(ff.data()), 0xF0810100'7F80FEFFull);
  EXPECT_EQ(recycle::get_be64(ff.data()), 0xFFFE807F'000181F0ull);
  // A negative int64 (a label) through its two's-complement form.
  s.clear();
  recycle::put_le64(&s, static_cast<uint64_t>(int64_t{-2}));
  EXPECT_EQ(s, bytes({0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}));
  EXPECT_EQ(static_cast<int64_t>(recycle::get_le64(s.data())), -2);
}

TEST(Coding, RoundTripsEdgeValues) {
  const std::vector<uint64_t> values = {0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x7FFFFFFF, 0x80000000,
                                        0xFFFFFFFF, 0x100000000ull, 0x7FFFFFFFFFFFFFFFull,
                                        0x8000000000000000ull, 0xFFFFFFFFFFFFFFFFull,
                                        0x0123456789ABCDEFull};
  for (uint64_t v : values) {
    const uint32_t v32 = static_cast<uint32_t>(v);
    char b[8];
    recycle::put_le32(b, v32);
    EXPECT_EQ(recycle::get_le32(b), v32) << v;
    recycle::put_be32(b, v32);
    EXPECT_EQ(recycle::get_be32(b), v32) << v;
    recycle::put_le64(b, v);
    EXPECT_EQ(recycle::get_le64(b), v) << v;
    recycle::put_be64(b, v);
    EXPECT_EQ(recycle::get_be64(b), v) << v;
  }
}

TEST(Coding, BigEndianOrderIsNumericOrder) {
  // What the samples index relies on: byte-wise comparison of the keys sorts positions.
  std::string a, b;
  recycle::put_be64(&a, 255);
  recycle::put_be64(&b, 256);
  EXPECT_LT(a, b);
  std::string c, d;
  recycle::put_be32(&c, 0x00FFFFFF);
  recycle::put_be32(&d, 0x01000000);
  EXPECT_LT(c, d);
}

TEST(Coding, AppendsAndUnalignedAndUnsignedBytes) {
  std::string s = "x";
  recycle::put_le32(&s, 7);
  recycle::put_be64(&s, 9);
  ASSERT_EQ(s.size(), 13u);
  EXPECT_EQ(s[0], 'x');
  EXPECT_EQ(recycle::get_le32(s.data() + 1), 7u);  // odd offsets
  EXPECT_EQ(recycle::get_be64(s.data() + 5), 9u);
  const std::vector<unsigned char> u = {0x00, 0x00, 0x27, 0x10, 0xAA};
  EXPECT_EQ(recycle::get_be32(u.data()), 10000u);
  EXPECT_EQ(recycle::get_le32(u.data() + 1), 0xAA102700u);
}
