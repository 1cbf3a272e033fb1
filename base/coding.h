// Fixed-width integer coding: the one place where integers become bytes and back, for every
// on-disk and in-key format of the project (records, the samples index, keys, IDX headers).
//
//   le = little-endian (least significant byte first): record headers, checksums, labels
//   be = big-endian (most significant byte first): keys and index positions, so that byte
//        order (RocksDB's) is numeric order; IDX dimensions
//
// put_*(char* out, v) writes exactly 4 or 8 bytes at out (any alignment); put_*(std::string*,
// v) appends them. get_*(p) reads 4 or 8 bytes at p (char or unsigned char, any alignment).
// The caller guarantees the bytes are there. Pure functions, independent of the host's byte
// order; thread safe. Header-only, no dependencies (keyers/ is below everything else and uses
// it, so it lives under base/, the one folder below keyers/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace recycle {

namespace coding_detail {

template <typename Int>
inline void put_le(char* out, Int v) {
  for (size_t i = 0; i < sizeof(Int); ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
template <typename Int>
inline void put_be(char* out, Int v) {
  for (size_t i = 0; i < sizeof(Int); ++i) {
    out[i] = static_cast<char>((v >> (8 * (sizeof(Int) - 1 - i))) & 0xFF);
  }
}
template <typename Int, typename Byte>
inline Int get_le(const Byte* p) {
  static_assert(sizeof(Byte) == 1, "bytes only");
  Int v = 0;
  for (size_t i = sizeof(Int); i-- > 0;)
    v = static_cast<Int>((v << 8) | static_cast<uint8_t>(p[i]));
  return v;
}
template <typename Int, typename Byte>
inline Int get_be(const Byte* p) {
  static_assert(sizeof(Byte) == 1, "bytes only");
  Int v = 0;
  for (size_t i = 0; i < sizeof(Int); ++i)
    v = static_cast<Int>((v << 8) | static_cast<uint8_t>(p[i]));
  return v;
}
template <typename Int, void (*Put)(char*, Int)>
inline void append(std::string* s, Int v) {
  char buf[sizeof(Int)];
  Put(buf, v);
  s->append(buf, sizeof(Int));
}

}  // namespace coding_detail

inline void put_le32(char* out, uint32_t v) { coding_detail::put_le(out, v); }
inline void put_le64(char* out, uint64_t v) { coding_detail::put_le(out, v); }
inline void put_be32(char* out, uint32_t v) { coding_detail::put_be(out, v); }
inline void put_be64(char* out, uint64_t v) { coding_detail::put_be(out, v); }

inline void put_le32(std::string* s, uint32_t v) {
  coding_detail::append<uint32_t, put_le32>(s, v);
}
inline void put_le64(std::string* s, uint64_t v) {
  coding_detail::append<uint64_t, put_le64>(s, v);
}
inline void put_be32(std::string* s, uint32_t v) {
  coding_detail::append<uint32_t, put_be32>(s, v);
}
inline void put_be64(std::string* s, uint64_t v) {
  coding_detail::append<uint64_t, put_be64>(s, v);
}

inline uint32_t get_le32(const char* p) { return coding_detail::get_le<uint32_t>(p); }
inline uint64_t get_le64(const char* p) { return coding_detail::get_le<uint64_t>(p); }
inline uint32_t get_be32(const char* p) { return coding_detail::get_be<uint32_t>(p); }
inline uint64_t get_be64(const char* p) { return coding_detail::get_be<uint64_t>(p); }

inline uint32_t get_le32(const unsigned char* p) { return coding_detail::get_le<uint32_t>(p); }
inline uint64_t get_le64(const unsigned char* p) { return coding_detail::get_le<uint64_t>(p); }
inline uint32_t get_be32(const unsigned char* p) { return coding_detail::get_be<uint32_t>(p); }
inline uint64_t get_be64(const unsigned char* p) { return coding_detail::get_be<uint64_t>(p); }

}  // namespace recycle
