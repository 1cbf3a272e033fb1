// Codecs: how a record stores float activations. fp32 is exact; fp16 and bf16 halve the bytes
// (round to nearest even). int8 quarters them: each channel is stored as a scale and an offset
// (two f32) and one byte per value, decoded as offset + scale * q (q in 0..255), within
// scale / 2 of the value (plus float rounding of that sum). Pure functions on arrays; thread
// safe.
//
// Channels (int8 only; the other codecs ignore them): the n values are split into `channels`
// equal runs of n / channels consecutive values, channel c being values [c * n / channels,
// (c + 1) * n / channels). A record tensor's channels are its first dimension (shape[0]):
// C of a [C, H, W] image activation, the sequence position of a [T, D] text activation (one
// scale per token), a single channel for a rank-0 tensor (see channels_of in cache/record.h).
//
// int8 payload of n values in C channels (every f32 little-endian IEEE-754, no alignment):
//   (scale:f32 offset:f32) x C | q:u8 x n
// scale = (max - min) / 255 of the channel (0 for a constant channel), offset = min, and
// q = round((x - offset) / scale). int8 stores finite values only: encoding a NaN or an
// infinity, or a channel whose max - min overflows float, throws std::invalid_argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace recycle {

enum class Codec : uint8_t { kFp32 = 1, kFp16 = 2, kBf16 = 3, kInt8 = 4 };

std::string codec_name(Codec codec);
// Parses "fp32", "fp16", "bf16" or "int8"; returns false for anything else.
bool parse_codec(std::string_view name, Codec* out);
// Also accepts the raw byte stored in a record; false for an unknown value.
bool codec_from_byte(uint8_t byte, Codec* out);
std::vector<std::string> codec_names();
// Bytes one value takes when encoded: 4, 2, 2, 1 (int8 adds codec_channel_bytes per channel).
size_t codec_value_bytes(Codec codec);
// Bytes of the per-channel header: 8 (scale and offset) for int8, 0 for the others.
size_t codec_channel_bytes(Codec codec);
// Bytes of the encoded payload of n values in `channels` channels.
size_t codec_payload_bytes(Codec codec, size_t n, size_t channels);

// Encodes n floats in `channels` channels (which must divide n; 1 when n is 0) into out
// (codec_payload_bytes(codec, n, channels) bytes, any alignment). Throws
// std::invalid_argument for channels that do not divide n, and, for int8, for a value that is
// not finite or a channel whose range overflows float.
void encode_values(Codec codec, const float* in, size_t n, size_t channels, char* out);
// Decodes n values in `channels` channels from in (any alignment) into out.
void decode_values(Codec codec, const char* in, size_t n, size_t channels, float* out);
// The same with one channel (all that fp32, fp16 and bf16 need).
void encode_values(Codec codec, const float* in, size_t n, char* out);
void decode_values(Codec codec, const char* in, size_t n, float* out);

// Checks what a payload holds besides its values: for int8, every scale is finite and >= 0,
// every offset finite, and offset + 255 * scale finite (so every decoded value is finite).
// Returns an empty string when it is fine, else what is wrong ("channel 3 has scale inf").
// Nothing to check (always empty) for fp32, fp16 and bf16.
std::string check_payload(Codec codec, const char* in, size_t channels);

}  // namespace recycle
