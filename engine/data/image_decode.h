// Decoding of image files into 8-bit pixels: PNG with libspng, JPEG with libjpeg-turbo
// (TurboJPEG API). The format is told by the first bytes, not the file's name.
//
// Conversions (documented in docs/tools.md, "Your own images"):
//   PNG 8-bit gray                 -> 1 channel
//   PNG gray of 1, 2 or 4 bits     -> 1 channel, scaled to 0-255
//   PNG RGB, palette, 16-bit, with alpha or tRNS -> 3 channels RGB, 8 bits (16-bit samples
//                                     scaled by libspng; alpha dropped, not composited, as
//                                     PIL's convert("RGB") does); gray + alpha -> 1 channel
//   JPEG gray -> 1 channel; JPEG YCbCr/RGB -> 3 channels RGB
//   JPEG CMYK or YCCK              -> refused (std::runtime_error: convert it to RGB)
// Anything else (not PNG or JPEG, truncated, corrupt): std::runtime_error "FILE: ..." with one
// line naming the file and what is wrong. No LibTorch here; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recycle {

struct DecodedImage {
  int64_t height = 0, width = 0, channels = 0;  // channels 1 or 3
  std::vector<uint8_t> pixels;                  // height x width x channels, interleaved
};

// Decodes bytes (a file's content) named `path` in messages.
DecodedImage decode_image(const std::string& bytes, const std::string& path);
// Reads and decodes a file; a file that cannot be read is a std::runtime_error naming it.
DecodedImage decode_image_file(const std::string& path);

}  // namespace recycle
