// key_from_hex (key_hex.h).
#include "cache/key_hex.h"

#include <string>

namespace recycle {

bool key_from_hex(std::string_view hex, Key* out) {
  if (hex.size() != 2 * Key::kBytes) return false;
  std::string raw(Key::kBytes, '\0');
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    raw[i / 2] = static_cast<char>(raw[i / 2] | (i % 2 ? v : v << 4));
  }
  return Key::from_bytes(raw, out);
}

}  // namespace recycle
