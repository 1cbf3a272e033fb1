// The byte tokenizer of the native text encoder (engine/models/transformer.h): a text's UTF-8
// bytes, each one token, id = byte value + 1, so id 0 is free for padding. It has no learned
// vocabulary, so nothing is stored with the weights but its spec (byte_tokenizer_spec(), kept
// in a text cache's manifest as its preprocessing). Texts longer than max_tokens bytes keep
// their first max_tokens bytes (truncation may cut a multi-byte character: the tokens are
// bytes, not characters). No LibTorch here; pure functions, thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace recycle {

constexpr int64_t kPadToken = 0;
constexpr int64_t kByteVocabulary = 257;  // 256 byte values + padding

// "utf8-bytes:id=byte+1,pad=0,truncate=tail": what a text cache's manifest stores as its
// preprocessing, so changing the tokenizer invalidates caches built before.
std::string byte_tokenizer_spec();

// The tokens of `text`, at most max_tokens of them (ids 1..256). Throws std::invalid_argument
// for an empty text or max_tokens < 1.
std::vector<int64_t> byte_tokens(std::string_view text, int64_t max_tokens);

// The number of tokens byte_tokens would return: min(text.size(), max_tokens).
int64_t byte_token_count(std::string_view text, int64_t max_tokens);

}  // namespace recycle
