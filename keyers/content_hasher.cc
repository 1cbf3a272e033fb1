#include "recycle/content_hasher.h"

#include <cstring>
#include <stdexcept>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/coding.h"

namespace recycle {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<int64_t> TensorView::contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

ContentHasher::ContentHasher(uint64_t seed) : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset_withSeed(static_cast<XXH3_state_t*>(state_), seed);
}

ContentHasher::~ContentHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void ContentHasher::update_raw(const void* p, size_t n) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), p, n);
}

void ContentHasher::update_u64(uint64_t v) {
  char b[8];
  put_le64(b, v);  // little-endian on every host, so keys do not depend on the machine
  update_raw(b, sizeof b);
}

void ContentHasher::update_field(std::string_view bytes) {
  update_u64(bytes.size());
  update_raw(bytes.data(), bytes.size());
}

namespace {

// Copies the strided elements of `t` into `out` in row-major order.
void gather(const TensorView& t, char* out) {
  const size_t es = t.element_size;
  const int64_t nd = static_cast<int64_t>(t.shape.size());
  std::vector<int64_t> idx(nd, 0);
  const char* base = static_cast<const char*>(t.data);
  const int64_t n = t.numel();
  // Innermost dimension as a run; walk the outer index like an odometer.
  const int64_t inner = nd == 0 ? 1 : t.shape[nd - 1];
  const int64_t inner_stride = nd == 0 ? 0 : t.strides[nd - 1];
  for (int64_t done = 0; done < n; done += inner) {
    int64_t offset = 0;
    for (int64_t d = 0; d + 1 < nd; ++d) offset += idx[d] * t.strides[d];
    for (int64_t i = 0; i < inner; ++i) {
      std::memcpy(out, base + (offset + i * inner_stride) * static_cast<int64_t>(es), es);
      out += es;
    }
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

void ContentHasher::update_tensor(const TensorView& t) {
  if (t.strides.size() != t.shape.size()) {
    throw std::invalid_argument("TensorView: strides and shape differ in rank");
  }
  update_field(t.dtype);
  update_u64(t.shape.size());
  for (int64_t s : t.shape) update_u64(static_cast<uint64_t>(s));
  const int64_t n = t.numel();
  const size_t bytes = static_cast<size_t>(n) * t.element_size;
  update_u64(bytes);
  if (n == 0) return;
  if (t.is_contiguous()) {
    update_raw(t.data, bytes);
    return;
  }
  gather_buffer_.resize(bytes);
  gather(t, gather_buffer_.data());
  update_raw(gather_buffer_.data(), bytes);
}

Key ContentHasher::digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return Key{h.high64, h.low64};
}

Key hash128(std::string_view bytes, uint64_t seed) {
  XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), seed);
  return Key{h.high64, h.low64};
}

}  // namespace recycle
