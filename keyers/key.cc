#include "recycle/key.h"

#include "base/coding.h"

namespace recycle {

void Key::to_bytes(char out[kBytes]) const {
  put_be64(out, hi);
  put_be64(out + 8, lo);
}

std::string Key::to_bytes() const {
  std::string s(kBytes, '\0');
  to_bytes(s.data());
  return s;
}

bool Key::from_bytes(std::string_view bytes, Key* out) {
  if (bytes.size() != kBytes) return false;
  out->hi = get_be64(bytes.data());
  out->lo = get_be64(bytes.data() + 8);
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
