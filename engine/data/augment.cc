#include "engine/data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "engine/data/image_transform.h"

namespace recycle {

namespace {

constexpr double kPi = 3.14159265358979323846;

// splitmix64: a tiny generator with exact, portable output for a seed.
class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int64_t integer(int64_t lo, int64_t hi) {  // [lo, hi], hi - lo small
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

struct OpInfo {
  Augment::Op op;
  const char* name;
  bool takes_value;
  double lo, hi;         // the value's range
  bool lo_open, integer;  // lo itself excluded; the value a whole number
  const char* range;     // as the error names it
};

constexpr OpInfo kOps[] = {
    {Augment::Op::kHflip, "hflip", false, 0, 0, false, false, ""},
    {Augment::Op::kCrop, "crop", true, 1, 64, false, true, "a whole number of pixels in 1-64"},
    {Augment::Op::kResizedCrop, "resized-crop", true, 0, 0.999999, true, false,
     "a smallest area fraction above 0 and below 1"},
    {Augment::Op::kRotate, "rotate", true, 0, 180, true, false, "degrees above 0, at most 180"},
    {Augment::Op::kJitter, "jitter", true, 0, 1, true, false, "a strength above 0, at most 1"},
};

const OpInfo& info(Augment::Op op) {
  for (const OpInfo& i : kOps) {
    if (i.op == op) return i;
  }
  throw std::logic_error("unknown augmentation op");
}

std::string format_value(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

uint8_t clamp_byte(double v) {
  const double r = std::floor(v + 0.5);
  return static_cast<uint8_t>(r < 0 ? 0 : r > 255 ? 255 : r);
}

void hflip(uint8_t* p, int64_t c, int64_t h, int64_t w) {
  for (int64_t row = 0; row < c * h; ++row) std::reverse(p + row * w, p + (row + 1) * w);
}

// Pad by `pad` zeros on every side, cut the h x w window at (top, left) of the padded image.
void shift(uint8_t* p, int64_t c, int64_t h, int64_t w, int64_t pad, int64_t top, int64_t left,
           std::vector<uint8_t>* scratch) {
  scratch->assign(p, p + c * h * w);
  const uint8_t* in = scratch->data();
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t y = 0; y < h; ++y) {
      const int64_t sy = y + top - pad;
      uint8_t* out = p + (ch * h + y) * w;
      for (int64_t x = 0; x < w; ++x) {
        const int64_t sx = x + left - pad;
        out[x] = (sy < 0 || sy >= h || sx < 0 || sx >= w) ? 0 : in[(ch * h + sy) * w + sx];
      }
    }
  }
}

// torchvision's RandomResizedCrop.get_params: ten tries at a window of the drawn area and
// aspect ratio that fits, else the whole image's largest centred window of a ratio in range.
void resized_crop(uint8_t* p, int64_t c, int64_t h, int64_t w, double smin, Draws* d,
                  std::vector<uint8_t>* scratch) {
  const double area = static_cast<double>(h * w);
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  int64_t ch = h, cw = w, top = 0, left = 0;
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target = area * d->uniform(smin, 1.0);
    const double ratio = std::exp(d->uniform(log_lo, log_hi));
    const int64_t tw = static_cast<int64_t>(std::llround(std::sqrt(target * ratio)));
    const int64_t th = static_cast<int64_t>(std::llround(std::sqrt(target / ratio)));
    if (tw > 0 && tw <= w && th > 0 && th <= h) {
      ch = th;
      cw = tw;
      top = d->integer(0, h - th);
      left = d->integer(0, w - tw);
      found = true;
    }
  }
  if (!found) {  // the fallback: a centred window, its ratio clamped to [3/4, 4/3]
    const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
    if (in_ratio < 3.0 / 4.0) {
      cw = w;
      ch = static_cast<int64_t>(std::llround(w / (3.0 / 4.0)));
    } else if (in_ratio > 4.0 / 3.0) {
      ch = h;
      cw = static_cast<int64_t>(std::llround(h * (4.0 / 3.0)));
    }
    ch = std::min(ch, h);
    cw = std::min(cw, w);
    top = (h - ch) / 2;
    left = (w - cw) / 2;
  }
  scratch->resize(static_cast<size_t>(c * ch * cw));
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t y = 0; y < ch; ++y) {
      std::memcpy(scratch->data() + (k * ch + y) * cw, p + (k * h + top + y) * w + left,
                  static_cast<size_t>(cw));
    }
  }
  resize_bilinear_antialias(scratch->data(), c, ch, cw, p, h, w);
}

// Rotation about the image centre by `degrees` (counter-clockwise, as torchvision's), nearest
// pixel, 0 where the source falls outside.
void rotate(uint8_t* p, int64_t c, int64_t h, int64_t w, double degrees,
            std::vector<uint8_t>* scratch) {
  scratch->assign(p, p + c * h * w);
  const double a = degrees * kPi / 180.0;
  const double cs = std::cos(a), sn = std::sin(a);
  const double cx = (w - 1) * 0.5, cy = (h - 1) * 0.5;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      // The source of output (x, y): the inverse rotation (y grows downwards).
      const double dx = x - cx, dy = y - cy;
      const int64_t sx = static_cast<int64_t>(std::floor(cs * dx - sn * dy + cx + 0.5));
      const int64_t sy = static_cast<int64_t>(std::floor(sn * dx + cs * dy + cy + 0.5));
      const bool inside = sx >= 0 && sx < w && sy >= 0 && sy < h;
      for (int64_t k = 0; k < c; ++k) {
        p[(k * h + y) * w + x] = inside ? (*scratch)[(k * h + sy) * w + sx] : 0;
      }
    }
  }
}

// Brightness (scale) then contrast (blend with the mean of the grey image, as torchvision's
// adjust_contrast: the mean of ITU-R 601 luma for RGB).
void jitter(uint8_t* p, int64_t c, int64_t h, int64_t w, double brightness, double contrast) {
  const int64_t n = c * h * w, hw = h * w;
  for (int64_t i = 0; i < n; ++i) p[i] = clamp_byte(p[i] * brightness);
  double sum = 0;
  if (c == 3) {
    for (int64_t i = 0; i < hw; ++i) {
      sum += 0.299 * p[i] + 0.587 * p[hw + i] + 0.114 * p[2 * hw + i];
    }
  } else {
    for (int64_t i = 0; i < n; ++i) sum += p[i];
  }
  const double mean = sum / static_cast<double>(c == 3 ? hw : n);
  for (int64_t i = 0; i < n; ++i) p[i] = clamp_byte((p[i] - mean) * contrast + mean);
}

}  // namespace

Augment Augment::parse(const std::string& spec) {
  Augment a;
  if (spec.empty()) return a;
  size_t pos = 0;
  while (true) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, end - pos);
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const OpInfo* op = nullptr;
    for (const OpInfo& i : kOps) {
      if (name == i.name) op = &i;
    }
    if (op == nullptr) {
      throw std::invalid_argument("--augment '" + spec + "': unknown op '" + name +
                                  "' (expected hflip, crop=P, resized-crop=S, rotate=D, jitter=B)");
    }
    Step step{op->op, 0};
    if (!op->takes_value) {
      if (eq != std::string::npos) {
        throw std::invalid_argument("--augment " + name + " takes no value");
      }
    } else {
      const std::string text = eq == std::string::npos ? "" : item.substr(eq + 1);
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      const bool in_range = std::isfinite(v) && (op->lo_open ? v > op->lo : v >= op->lo) &&
                            v <= op->hi && (!op->integer || v == std::floor(v));
      if (text.empty() || used != text.size() || !in_range) {
        throw std::invalid_argument("--augment " + name + "=" + text + ": expected " + op->range);
      }
      step.value = v;
    }
    for (const Step& s : a.steps_) {
      if (s.op == step.op) throw std::invalid_argument("--augment names " + name + " twice");
    }
    a.steps_.push_back(step);
    if (end == spec.size()) break;
    pos = end + 1;
    if (pos == spec.size()) throw std::invalid_argument("--augment '" + spec + "' ends in ','");
  }
  return a;
}

std::string Augment::spec() const {
  std::string out;
  for (const Step& s : steps_) {
    const OpInfo& i = info(s.op);
    if (!out.empty()) out += ',';
    out += i.name;
    if (i.takes_value) out += "=" + format_value(s.value);
  }
  return out;
}

void Augment::apply(uint8_t* pixels, int64_t c, int64_t h, int64_t w, uint64_t seed) const {
  Draws d(seed);
  std::vector<uint8_t> scratch;
  for (const Step& s : steps_) {
    switch (s.op) {
      case Op::kHflip:
        if (d.uniform() < 0.5) hflip(pixels, c, h, w);
        break;
      case Op::kCrop: {
        const int64_t pad = static_cast<int64_t>(s.value);
        const int64_t top = d.integer(0, 2 * pad), left = d.integer(0, 2 * pad);
        shift(pixels, c, h, w, pad, top, left, &scratch);
        break;
      }
      case Op::kResizedCrop: resized_crop(pixels, c, h, w, s.value, &d, &scratch); break;
      case Op::kRotate: rotate(pixels, c, h, w, d.uniform(-s.value, s.value), &scratch); break;
      case Op::kJitter: {
        const double lo = std::max(0.0, 1.0 - s.value), hi = 1.0 + s.value;
        const double brightness = d.uniform(lo, hi);
        const double contrast = d.uniform(lo, hi);
        jitter(pixels, c, h, w, brightness, contrast);
        break;
      }
    }
  }
}

void Augment::check_image(int64_t h, int64_t w) const {
  for (const Step& s : steps_) {
    if (s.op != Op::kCrop) continue;
    const int64_t pad = static_cast<int64_t>(s.value);
    if (2 * pad > std::min(h, w)) {
      throw std::invalid_argument("--augment crop=" + std::to_string(pad) +
                                  " is too large for images of " + std::to_string(h) + "x" +
                                  std::to_string(w) +
                                  ": a view would be mostly padding (give "
                                  "crop=P with P at most " +
                                  std::to_string(std::min(h, w) / 2) + ", half the smaller side)");
    }
  }
}

int64_t epoch_view(uint64_t seed, int64_t position, int64_t epoch, int64_t views) {
  if (views <= 1) return 0;
  Draws d(seed ^ (static_cast<uint64_t>(position) * 0xD6E8FEB86659FD93ULL));
  const uint64_t offset = d.next() % static_cast<uint64_t>(views);
  return static_cast<int64_t>((offset + static_cast<uint64_t>(epoch)) %
                              static_cast<uint64_t>(views));
}

}  // namespace recycle
