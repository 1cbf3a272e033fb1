#include "engine/data/byte_tokenizer.h"

#include <algorithm>
#include <stdexcept>

namespace recycle {

std::string byte_tokenizer_spec() { return "utf8-bytes:id=byte+1,pad=0,truncate=tail"; }

int64_t byte_token_count(std::string_view text, int64_t max_tokens) {
  return std::min(static_cast<int64_t>(text.size()), max_tokens);
}

std::vector<int64_t> byte_tokens(std::string_view text, int64_t max_tokens) {
  if (max_tokens < 1) throw std::invalid_argument("max_tokens must be at least 1");
  if (text.empty()) throw std::invalid_argument("an empty text has no tokens");
  std::vector<int64_t> ids(static_cast<size_t>(byte_token_count(text, max_tokens)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]) + 1;
  return ids;
}

}  // namespace recycle
