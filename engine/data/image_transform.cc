#include "engine/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace recycle {

namespace {

constexpr int64_t kMaxSide = 65536;

int64_t parse_side(const std::string& op, const std::string& value) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || v < 1 || v > kMaxSide) {
    throw std::invalid_argument("--transform " + op + "=" + value + ": expected a size in 1-" +
                                std::to_string(kMaxSide));
  }
  return v;
}

std::vector<float> parse_values(const std::string& what, const std::string& text, bool positive) {
  std::vector<float> out;
  size_t pos = 0;
  while (true) {
    const size_t end = std::min(text.find(':', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    size_t used = 0;
    float v = 0;
    try {
      v = std::stof(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isfinite(v) || (positive && !(v > 0))) {
      throw std::invalid_argument("--transform normalize: " + what + " '" + item +
                                  "' is not a " + (positive ? "positive " : "") + "number");
    }
    out.push_back(v);
    if (end == text.size()) break;
    pos = end + 1;
  }
  return out;
}

std::string format_values(const std::vector<float>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", values[i]);
    if (i > 0) out += ':';
    out += buf;
  }
  return out;
}

// Python's round() of d / 2 for an integer d >= 0: halves go to the even neighbour.
int64_t half_round_even(int64_t d) {
  const int64_t k = d / 2;
  if (d % 2 == 0) return k;
  return k % 2 == 0 ? k : k + 1;
}

// One axis of the antialiased bilinear filter: for each output index its first input index
// and normalised weights (PIL's ImagingResample coefficients).
struct Taps {
  std::vector<int64_t> first, count;
  std::vector<double> weights;  // max_count per output
  int64_t max_count = 0;
};

Taps make_taps(int64_t in, int64_t out) {
  Taps t;
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  t.max_count = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out);
  t.count.resize(out);
  t.weights.assign(static_cast<size_t>(out * t.max_count), 0.0);
  for (int64_t x = 0; x < out; ++x) {
    const double center = (x + 0.5) * scale;
    int64_t lo = static_cast<int64_t>(center - support + 0.5);
    if (lo < 0) lo = 0;
    int64_t hi = static_cast<int64_t>(center + support + 0.5);
    if (hi > in) hi = in;
    const int64_t n = std::min(hi - lo, t.max_count);
    double total = 0;
    double* w = &t.weights[x * t.max_count];
    for (int64_t j = 0; j < n; ++j) {
      const double d = std::abs((j + lo - center + 0.5) * (1.0 / filterscale));  // as PIL
      w[j] = d < 1.0 ? 1.0 - d : 0.0;
      total += w[j];
    }
    if (total > 0) {
      for (int64_t j = 0; j < n; ++j) w[j] /= total;
    }
    t.first[x] = lo;
    t.count[x] = n;
  }
  return t;
}


}  // namespace

ImageTransform ImageTransform::parse(const std::string& spec,
                                     const std::vector<int64_t>& encoder_input) {
  ImageTransform t;
  auto input = [&](size_t i) { return i < encoder_input.size() ? encoder_input[i] : 0; };
  bool seen_channels = false, seen_resize = false, seen_crop = false, seen_norm = false;
  auto once = [](bool* seen, const std::string& op) {
    if (*seen) throw std::invalid_argument("--transform names " + op + " twice");
    *seen = true;
  };
  size_t pos = 0;
  while (pos < spec.size()) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, end - pos);
    const size_t eq = item.find('=');
    const std::string op = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    const bool has_value = eq != std::string::npos;
    if ((op == "gray" || op == "grey" || op == "rgb") && !has_value) {
      once(&seen_channels, "gray/rgb");
      t.channels = op == "rgb" ? 3 : 1;
    } else if (op == "resize" && has_value) {
      once(&seen_resize, op);
      t.resize = parse_side(op, value);
    } else if (op == "center-crop" && has_value) {
      once(&seen_crop, op);
      t.crop = parse_side(op, value);
    } else if (op == "normalize" && has_value) {
      once(&seen_norm, op);
      const size_t slash = value.find('/');
      if (slash == std::string::npos) {
        throw std::invalid_argument("--transform normalize=" + value + ": expected MEAN/STD");
      }
      t.mean = parse_values("mean", value.substr(0, slash), false);
      t.std = parse_values("std", value.substr(slash + 1), true);
    } else {
      throw std::invalid_argument("--transform: unknown op '" + item +
                                  "' (expected gray, rgb, resize=S, center-crop=S, "
                                  "normalize=MEAN/STD)");
    }
    if (end == spec.size()) break;
    pos = end + 1;
    if (pos == spec.size()) throw std::invalid_argument("--transform '" + spec + "' ends in ','");
  }
  if (!seen_channels && (input(0) == 1 || input(0) == 3)) t.channels = input(0);
  if (!seen_resize && !seen_crop && input(1) > 0 && input(1) == input(2)) {
    if (input(1) > kMaxSide) {
      throw std::invalid_argument("the encoder's input of " + std::to_string(input(1)) +
                                  " pixels a side is larger than --transform allows");
    }
    t.resize = t.crop = input(1);
  }
  if (!t.mean.empty()) {
    const size_t c = static_cast<size_t>(t.channels);
    for (const std::vector<float>* v : {&t.mean, &t.std}) {
      if (v->size() != 1 && v->size() != c) {
        throw std::invalid_argument("--transform normalize: " + std::to_string(v->size()) +
                                    " values for " + std::to_string(c) + " channel(s)");
      }
    }
  }
  return t;
}

std::string ImageTransform::spec() const {
  std::string out = channels == 3 ? "rgb" : "gray";
  if (resize > 0) out += ",resize=" + std::to_string(resize);
  if (crop > 0) out += ",center-crop=" + std::to_string(crop);
  if (!mean.empty()) out += ",normalize=" + format_values(mean) + "/" + format_values(std);
  return out;
}

void ImageTransform::output_size(int64_t h, int64_t w, int64_t* oh, int64_t* ow) const {
  int64_t rh = h, rw = w;
  if (resize > 0) {
    if (w <= h) {
      rw = resize;
      rh = resize * h / w;
    } else {
      rh = resize;
      rw = resize * w / h;
    }
  }
  *oh = crop > 0 ? crop : rh;
  *ow = crop > 0 ? crop : rw;
}

void resize_bilinear_antialias(const uint8_t* in, int64_t c, int64_t h, int64_t w, uint8_t* out,
                               int64_t oh, int64_t ow) {
  // PIL's 8-bit resampling: coefficients in fixed point of 22 fraction bits, rounded to bytes
  // after the horizontal pass and again after the vertical one (a pass is skipped when its
  // size does not change), so the bytes are PIL's.
  constexpr int kBits = 22;
  auto fixed = [](const Taps& t) {
    std::vector<int32_t> k(t.weights.size());
    for (size_t i = 0; i < k.size(); ++i) {
      const double v = t.weights[i] * (1 << kBits);
      k[i] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
    }
    return k;
  };
  auto clip8 = [](int64_t acc) -> uint8_t {
    const int64_t v = acc >> kBits;
    return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
  };
  const Taps tx = make_taps(w, ow), ty = make_taps(h, oh);
  const std::vector<int32_t> kx = fixed(tx), ky = fixed(ty);
  std::vector<uint8_t> rows(static_cast<size_t>(h * ow));  // horizontal pass, one channel
  for (int64_t ch = 0; ch < c; ++ch) {
    const uint8_t* src = in + ch * h * w;
    const uint8_t* mid = src;  // the horizontal pass's output, [h, ow]
    if (ow != w) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < ow; ++x) {
          const int32_t* k = &kx[x * tx.max_count];
          const uint8_t* p = src + y * w + tx.first[x];
          int64_t acc = int64_t{1} << (kBits - 1);
          for (int64_t j = 0; j < tx.count[x]; ++j) acc += static_cast<int64_t>(k[j]) * p[j];
          rows[y * ow + x] = clip8(acc);
        }
      }
      mid = rows.data();
    }
    uint8_t* dst = out + ch * oh * ow;
    if (oh == h) {
      std::memcpy(dst, mid, static_cast<size_t>(h * ow));
      continue;
    }
    for (int64_t y = 0; y < oh; ++y) {
      const int32_t* k = &ky[y * ty.max_count];
      for (int64_t x = 0; x < ow; ++x) {
        int64_t acc = int64_t{1} << (kBits - 1);
        for (int64_t j = 0; j < ty.count[y]; ++j) {
          acc += static_cast<int64_t>(k[j]) * mid[(ty.first[y] + j) * ow + x];
        }
        dst[y * ow + x] = clip8(acc);
      }
    }
  }
}

void ImageTransform::apply(const uint8_t* pixels, int64_t h, int64_t w, int64_t c,
                           uint8_t* out) const {
  const int64_t n = h * w;
  // Channel conversion into planar [channels, h, w].
  std::vector<uint8_t> planar(static_cast<size_t>(channels * n));
  if (c == 1) {
    for (int64_t ch = 0; ch < channels; ++ch) std::memcpy(planar.data() + ch * n, pixels, n);
  } else if (channels == 3) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t ch = 0; ch < 3; ++ch) planar[ch * n + i] = pixels[i * 3 + ch];
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t r = pixels[i * 3], g = pixels[i * 3 + 1], b = pixels[i * 3 + 2];
      planar[i] = static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
    }
  }
  int64_t rh = h, rw = w;
  if (resize > 0) {
    ImageTransform size_only;
    size_only.resize = resize;
    size_only.output_size(h, w, &rh, &rw);
  }
  std::vector<uint8_t> resized;
  const uint8_t* img = planar.data();
  if (rh != h || rw != w) {
    resized.resize(static_cast<size_t>(channels * rh * rw));
    resize_bilinear_antialias(planar.data(), channels, h, w, resized.data(), rh, rw);
    img = resized.data();
  }
  if (crop <= 0) {
    std::memcpy(out, img, static_cast<size_t>(channels * rh * rw));
    return;
  }
  // Zero padding to at least crop x crop (left/top (crop - side) / 2), then the rounded center.
  const int64_t ph = std::max(rh, crop), pw = std::max(rw, crop);
  const int64_t pad_top = (ph - rh) / 2, pad_left = (pw - rw) / 2;
  const int64_t top = half_round_even(ph - crop), left = half_round_even(pw - crop);
  std::memset(out, 0, static_cast<size_t>(channels * crop * crop));
  for (int64_t ch = 0; ch < channels; ++ch) {
    for (int64_t y = 0; y < crop; ++y) {
      const int64_t sy = y + top - pad_top;
      if (sy < 0 || sy >= rh) continue;
      for (int64_t x = 0; x < crop; ++x) {
        const int64_t sx = x + left - pad_left;
        if (sx < 0 || sx >= rw) continue;
        out[(ch * crop + y) * crop + x] = img[(ch * rh + sy) * rw + sx];
      }
    }
  }
}

}  // namespace recycle
