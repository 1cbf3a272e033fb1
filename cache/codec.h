// Codecs: how a record stores float activations. fp32 is exact; fp16 and bf16 halve the bytes
// (round to nearest even). Pure functions on arrays; thread safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace recycle {

enum class Codec : uint8_t { kFp32 = 1, kFp16 = 2, kBf16 = 3 };

std::string codec_name(Codec codec);
// Parses "fp32", "fp16" or "bf16"; returns false for anything else.
bool parse_codec(std::string_view name, Codec* out);
// Also accepts the raw byte stored in a record; false for an unknown value.
bool codec_from_byte(uint8_t byte, Codec* out);
std::vector<std::string> codec_names();
// Bytes one value takes when encoded.
size_t codec_value_bytes(Codec codec);

// Encodes n floats into out (n * codec_value_bytes(codec) bytes, any alignment).
void encode_values(Codec codec, const float* in, size_t n, char* out);
// Decodes n values from in (any alignment) into out.
void decode_values(Codec codec, const char* in, size_t n, float* out);

}  // namespace recycle
