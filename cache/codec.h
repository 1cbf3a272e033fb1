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
// infinity, or a channel whose max - min overflows float, throws CodecRangeError.
//
// Range: encode_values converts whatever it is given (fp16 and bf16 turn values beyond their
// range into infinities, and keep infinities and NaN); a record (cache/record.h) holds finite
// values only in fp16, bf16 and int8, which encode_record enforces with check_encoded_range.
// fp32 stores every value as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "recycle/formats.h"

namespace recycle {

// Values a codec cannot store: a NaN or an infinity (fp16, bf16, int8), a value whose
// magnitude rounds past the codec's largest finite value (fp16: 65504, bf16: about 3.39e38),
// an int8 channel whose range overflows float. what() is one line naming the codec, the
// largest value and what to use instead; largest() is the value of largest magnitude among
// those encoded (NaN when one is NaN). Callers that know which sample it was rethrow it with
// the sample in front of the message (an std::invalid_argument: bad input, not a bug).
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
// a value that is not finite (fp16, bf16: a non-finite input, or one that rounded past the
// largest finite value). Nothing to check for fp32 (any value) and int8 (encode_values refuses).
void check_encoded_range(Codec codec, const float* in, size_t n, const char* out);

// What verify checks of an fp16 or bf16 payload of n values: "" when every value is finite,
// else which is not ("value 12 of 784 is inf"). Always "" for fp32 and int8 (int8's values
// are finite when check_payload passes).
std::string check_values(Codec codec, const char* in, size_t n);

// Checks what a payload holds besides its values: for int8, every scale is finite and >= 0,
// every offset finite, and offset + 255 * scale finite (so every decoded value is finite).
// Returns an empty string when it is fine, else what is wrong ("channel 3 has scale inf").
// Nothing to check (always empty) for fp32, fp16 and bf16.
std::string check_payload(Codec codec, const char* in, size_t channels);

}  // namespace recycle
