#include "keyers/key.h"

namespace recycle {

void Key::to_bytes(char out[kBytes]) const {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>((hi >> (56 - 8 * i)) & 0xFF);
    out[8 + i] = static_cast<char>((lo >> (56 - 8 * i)) & 0xFF);
  }
}

std::string Key::to_bytes() const {
  std::string s(kBytes, '\0');
  to_bytes(s.data());
  return s;
}

bool Key::from_bytes(std::string_view bytes, Key* out) {
  if (bytes.size() != kBytes) return false;
  Key k;
  for (int i = 0; i < 8; ++i) {
    k.hi = (k.hi << 8) | static_cast<uint8_t>(bytes[i]);
    k.lo = (k.lo << 8) | static_cast<uint8_t>(bytes[8 + i]);
  }
  *out = k;
  return true;
}

std::string Key::to_hex() const {
  static const char* digits = "0123456789abcdef";
  char raw[kBytes];
  to_bytes(raw);
  std::string s(2 * kBytes, '0');
  for (size_t i = 0; i < kBytes; ++i) {
    s[2 * i] = digits[(static_cast<uint8_t>(raw[i]) >> 4) & 0xF];
    s[2 * i + 1] = digits[static_cast<uint8_t>(raw[i]) & 0xF];
  }
  return s;
}

}  // namespace recycle
