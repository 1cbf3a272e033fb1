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
// q = round((x - offset) / scale). encode_values refuses, for int8, a NaN, an infinity, or a
// channel whose max - min overflows float (CodecRangeError).
//
// Range: encode_values converts whatever else it is given (fp32 copies every value, fp16 and
// bf16 turn values beyond their range into infinities, and keep infinities and NaN); a record
// (cache/record.h) holds finite values only, in every codec, which encode_record enforces
// with check_encoded_range. (Caches built before fp32 refused them may hold fp32 NaN or
// infinities: check_values finds them, and recycle-inspect --verify counts them as corrupt.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "recycle/formats.h"

namespace recycle {

// Values a codec cannot store: a NaN or an infinity (every codec, fp32 included: "fp32 codec:
// value 12 of 784 is NaN; no codec stores values that are not finite: the prefix's output is
// not finite (...)"), a value whose magnitude rounds past the codec's largest finite value
// (fp16: 65504, bf16: about 3.39e38; what() names the largest value and the codec to use
// instead), an int8 channel whose range overflows float. what() is one line; largest() is the
// value not finite, else the value of largest magnitude among those encoded. encode_record
// puts the tensor in front of the message, and callers that know which sample it was put the
// sample in front of that (an std::invalid_argument: bad input, not a bug).
class CodecRangeError : public std::invalid_argument {
 public:
  CodecRangeError(const std::string& what, float largest)
      : std::invalid_argument(what), largest_(largest) {}
  float largest() const { return largest_; }

 private:
  float largest_;
};

// Codec, codec_name and codec_names are in recycle/formats.h.
// Parses "fp32", "fp16", "bf16" or "int8"; returns false for anything else.
bool parse_codec(std::string_view name, Codec* out);
// Also accepts the raw byte stored in a record; false for an unknown value.
bool codec_from_byte(uint8_t byte, Codec* out);
// Bytes one value takes when encoded: 4, 2, 2, 1 (int8 adds codec_channel_bytes per channel).
size_t codec_value_bytes(Codec codec);
// Bytes of the per-channel header: 8 (scale and offset) for int8, 0 for the others.
size_t codec_channel_bytes(Codec codec);
// Bytes of the encoded payload of n values in `channels` channels.
size_t codec_payload_bytes(Codec codec, size_t n, size_t channels);

// Encodes n floats in `channels` channels (which must divide n; 1 when n is 0) into out
// (codec_payload_bytes(codec, n, channels) bytes, any alignment). Throws
// std::invalid_argument for channels that do not divide n, and, for int8, CodecRangeError for a
// value that is not finite or a channel whose range overflows float.
void encode_values(Codec codec, const float* in, size_t n, size_t channels, char* out);
// Decodes n values in `channels` channels from in (any alignment) into out.
void decode_values(Codec codec, const char* in, size_t n, size_t channels, float* out);
// The same with one channel (all that fp32, fp16 and bf16 need).
void encode_values(Codec codec, const float* in, size_t n, char* out);
void decode_values(Codec codec, const char* in, size_t n, float* out);

// Throws CodecRangeError when `out`, the payload encode_values made of the n values `in`, holds
// a value that is not finite (fp32: a non-finite input; fp16, bf16: a non-finite input, or one
// that rounded past the largest finite value), naming the first such input. Nothing to check
// for int8 (encode_values refuses). A branch-free scan of the payload, the slow search only
// when it finds something.
void check_encoded_range(Codec codec, const float* in, size_t n, const char* out);

// What verify checks of an fp32, fp16 or bf16 payload of n values: "" when every value is
// finite, else which is not ("fp32 value 12 of 784 is inf"). Always "" for int8 (its values
// are finite when check_payload passes).
std::string check_values(Codec codec, const char* in, size_t n);

// Checks what a payload holds besides its values: for int8, every scale is finite and >= 0,
// every offset finite, and offset + 255 * scale finite (so every decoded value is finite).
// Returns an empty string when it is fine, else what is wrong ("channel 3 has scale inf").
// Nothing to check (always empty) for fp32, fp16 and bf16.
std::string check_payload(Codec codec, const char* in, size_t channels);

}  // namespace recycle
