// Small PNG and JPEG files for the image folder tests, made with libspng and libjpeg-turbo.
#pragma once

#include <spng.h>
#include <turbojpeg.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace recycle::testing {

// A PNG of w x h pixels: color_type SPNG_COLOR_TYPE_*, bit_depth 8 or 16; `samples` holds
// h * w * channels values (16-bit ones host-endian).
inline std::string png_bytes(uint32_t w, uint32_t h, uint8_t color_type, uint8_t bit_depth,
                             const void* samples, size_t bytes) {
  spng_ctx* enc = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(enc, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = w;
  ihdr.height = h;
  ihdr.bit_depth = bit_depth;
  ihdr.color_type = color_type;
  spng_set_ihdr(enc, &ihdr);
  int err = spng_encode_image(enc, samples, bytes, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  size_t size = 0;
  void* buf = err == 0 ? spng_get_png_buffer(enc, &size, &err) : nullptr;
  spng_ctx_free(enc);
  if (err != 0 || buf == nullptr) {
    throw std::runtime_error(std::string("spng: ") + spng_strerror(err));
  }
  std::string out(static_cast<const char*>(buf), size);
  std::free(buf);
  return out;
}

inline void write_gray_png(const std::string& path, uint32_t w, uint32_t h,
                           const std::vector<uint8_t>& pixels) {
  write_file(path, png_bytes(w, h, SPNG_COLOR_TYPE_GRAYSCALE, 8, pixels.data(), pixels.size()));
}

// A JPEG of w x h pixels from `pixels` in TurboJPEG pixel format `format` (TJPF_GRAY, TJPF_RGB,
// TJPF_CMYK), quality 95, 4:4:4 (gray for TJPF_GRAY).
inline std::string jpeg_bytes(int w, int h, int format, const std::vector<uint8_t>& pixels) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int r = tjCompress2(tj, pixels.data(), w, 0, h, format, &buf, &size,
                            format == TJPF_GRAY ? TJSAMP_GRAY : TJSAMP_444, 95, 0);
  std::string out = r == 0 ? std::string(reinterpret_cast<char*>(buf), size) : std::string();
  const std::string why = r == 0 ? "" : tjGetErrorStr2(tj);
  tjFree(buf);
  tjDestroy(tj);
  if (r != 0) throw std::runtime_error("tjCompress2: " + why);
  return out;
}

}  // namespace recycle::testing
