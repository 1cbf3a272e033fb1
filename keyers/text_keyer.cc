#include "keyers/text_keyer.h"

#include <stdexcept>

namespace recycle {

namespace {
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
// A distinct seed keeps text keys apart from tensor and id keys of the same bytes.
constexpr uint64_t kTextSeed = 0x74657874;  // "text"
}  // namespace

std::string TextKeyer::spec() const {
  std::string s = "text";
  if (options_.normalize_space && options_.lower_case) return s + ":space,lower";
  if (options_.normalize_space) return s + ":space";
  if (options_.lower_case) return s + ":lower";
  return s;
}

std::string TextKeyer::normalized(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : text) {
    if (options_.normalize_space && is_ascii_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) {
      out.push_back(' ');
      pending_space = false;
    }
    if (options_.lower_case && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    out.push_back(c);
  }
  return out;
}

Key TextKeyer::key(const KeyInput& input) const {
  if (!input.has_text) throw std::invalid_argument("keyer text needs text input");
  if (!options_.normalize_space && !options_.lower_case) return hash128(input.text, kTextSeed);
  return hash128(normalized(input.text), kTextSeed);
}

}  // namespace recycle
