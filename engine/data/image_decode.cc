#include "engine/data/image_decode.h"

#include <spng.h>
#include <turbojpeg.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace recycle {

namespace {

// Larger images are refused before their pixels are allocated: at most this many per side, and
// at most kMaxPixels in all (Pillow's MAX_IMAGE_PIXELS, where it warns of a decompression bomb:
// a 2 MB PNG of zeros can declare 32768 x 32768 16-bit pixels). Memory in flight is then at
// most 3 x kMaxPixels bytes (268 MB) per decoding thread.
constexpr uint32_t kMaxSide = 1u << 15;
constexpr uint64_t kMaxPixels = 89478485;

void check_pixels(const std::string& path, const char* format, uint64_t w, uint64_t h) {
  if (w * h > kMaxPixels) {
    throw std::runtime_error(
        path + ": a " + format + " of " + std::to_string(w) + "x" + std::to_string(h) +
        " pixels (declared in its header) is more than the " + std::to_string(kMaxPixels) +
        " pixels an image may have (a decompression bomb, or resize it first)");
  }
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

bool is_png(const std::string& b) {
  static const char sig[] = "\x89PNG\r\n\x1a\n";
  return b.size() >= 8 && std::memcmp(b.data(), sig, 8) == 0;
}

bool is_jpeg(const std::string& b) {
  return b.size() >= 3 && static_cast<uint8_t>(b[0]) == 0xFF &&
         static_cast<uint8_t>(b[1]) == 0xD8 && static_cast<uint8_t>(b[2]) == 0xFF;
}

DecodedImage decode_png(const std::string& bytes, const std::string& path) {
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(0), spng_ctx_free);
  if (!ctx) fail(path, "out of memory for the PNG decoder");
  auto check = [&](int err, const char* step) {
    if (err != 0) {
      fail(path, std::string("not a valid PNG (") + step + ": " + spng_strerror(err) + ")");
    }
  };
  check(spng_set_image_limits(ctx.get(), kMaxSide, kMaxSide), "limits");
  check(spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size()), "buffer");
  spng_ihdr ihdr{};
  check(spng_get_ihdr(ctx.get(), &ihdr), "header");
  check_pixels(path, "PNG", ihdr.width, ihdr.height);
  const bool gray = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE ||
                    ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
  // 8-bit gray decodes as is; everything else as RGB8 (gray of other depths then keeps one
  // channel: libspng scales it to 8 bits and repeats it in R, G and B).
  const bool direct_gray = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth == 8;
  const int fmt = direct_gray ? SPNG_FMT_G8 : SPNG_FMT_RGB8;
  size_t size = 0;
  check(spng_decoded_image_size(ctx.get(), fmt, &size), "size");
  std::vector<uint8_t> decoded(size);
  check(spng_decode_image(ctx.get(), decoded.data(), decoded.size(), fmt, 0), "data");
  DecodedImage img;
  img.height = ihdr.height;
  img.width = ihdr.width;
  if (direct_gray) {
    img.channels = 1;
    img.pixels = std::move(decoded);
  } else if (gray) {
    img.channels = 1;
    const size_t n = static_cast<size_t>(img.height * img.width);
    img.pixels.resize(n);
    for (size_t i = 0; i < n; ++i) img.pixels[i] = decoded[i * 3];
  } else {
    img.channels = 3;
    img.pixels = std::move(decoded);
  }
  return img;
}

// One TurboJPEG decompressor per thread, made on the thread's first JPEG and kept until the
// thread ends (a handle is not thread safe; making one per file cost an allocation of the
// decoder's state per image).
tjhandle thread_decompressor(const std::string& path) {
  thread_local std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitDecompress(), tjDestroy);
  if (!tj) fail(path, "cannot start the JPEG decoder");
  return tj.get();
}

DecodedImage decode_jpeg(const std::string& bytes, const std::string& path) {
  tjhandle tj = thread_decompressor(path);
  auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(bytes.size()), &w, &h,
                          &subsamp, &colorspace) != 0) {
    fail(path, std::string("not a valid JPEG (") + tjGetErrorStr2(tj) + ")");
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    fail(path, "is a CMYK JPEG, which is not supported (convert it to RGB or grayscale)");
  }
  if (w < 1 || h < 1 || static_cast<uint32_t>(w) > kMaxSide ||
      static_cast<uint32_t>(h) > kMaxSide) {
    fail(path, "JPEG of " + std::to_string(w) + "x" + std::to_string(h) +
                   " pixels (at most " + std::to_string(kMaxSide) + " per side)");
  }
  check_pixels(path, "JPEG", static_cast<uint64_t>(w), static_cast<uint64_t>(h));
  DecodedImage img;
  img.height = h;
  img.width = w;
  img.channels = colorspace == TJCS_GRAY ? 1 : 3;
  img.pixels.resize(static_cast<size_t>(h) * w * img.channels);
  // Warnings (a truncated file, corrupt data) count as errors, as PIL refuses truncated files.
  if (tjDecompress2(tj, data, static_cast<unsigned long>(bytes.size()), img.pixels.data(), w,
                    0, h, img.channels == 1 ? TJPF_GRAY : TJPF_RGB, 0) != 0) {
    fail(path, std::string("not a valid JPEG (") + tjGetErrorStr2(tj) + ")");
  }
  return img;
}

}  // namespace

DecodedImage decode_image(const std::string& bytes, const std::string& path) {
  if (is_png(bytes)) return decode_png(bytes, path);
  if (is_jpeg(bytes)) return decode_jpeg(bytes, path);
  fail(path, bytes.empty() ? "is empty (expected a PNG or JPEG image)"
                           : "is not a PNG or JPEG image");
}

DecodedImage decode_image_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) fail(path, std::string("cannot read: ") + std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.append(buf, got);
  if (std::ferror(f.get())) fail(path, std::string("cannot read: ") + std::strerror(errno));
  return decode_image(bytes, path);
}

}  // namespace recycle
