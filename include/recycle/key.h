// Key: the 128-bit content key of one sample, the cache's primary key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace recycle {

// A 128-bit key. Value type; cheap to copy. Ordered and hashable so it can live in std
// containers. Stored in RocksDB as its 16-byte big-endian form (see to_bytes()).
struct Key {
  uint64_t hi = 0;
  uint64_t lo = 0;

  static constexpr size_t kBytes = 16;

  // 16 bytes, big-endian: hi then lo.
  std::string to_bytes() const;
  void to_bytes(char out[kBytes]) const;
  // Parses the 16-byte form; returns false (and leaves *out alone) when bytes.size() != 16.
  static bool from_bytes(std::string_view bytes, Key* out);
  // 32 lower-case hex digits.
  std::string to_hex() const;

  friend bool operator==(const Key& a, const Key& b) { return a.hi == b.hi && a.lo == b.lo; }
  friend bool operator!=(const Key& a, const Key& b) { return !(a == b); }
  friend bool operator<(const Key& a, const Key& b) {
    return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const noexcept {
    return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ULL));
  }
};

}  // namespace recycle
