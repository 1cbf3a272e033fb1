// ContentHasher: streaming XXH3-128 over typed, length-delimited fields and strided tensors.
// Used by the xxh3 keyer and by the engine's parameter fingerprint, so both hash tensors the
// same way: dtype name, rank, shape, then the bytes in contiguous (row-major) order.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "recycle/key.h"

namespace recycle {

// A non-owning view of an N-d array in memory. Strides are in elements (as LibTorch reports
// them); any strides are allowed, including 0 (broadcast) and negative ones.
// Not thread safe to mutate; the viewed memory must outlive the view's use.
struct TensorView {
  std::string_view dtype;       // e.g. "uint8", "float32": part of the hash
  std::vector<int64_t> shape;   // sizes per dimension
  std::vector<int64_t> strides; // element strides per dimension, same length as shape
  const void* data = nullptr;   // address of element [0, 0, ..., 0]
  size_t element_size = 0;      // bytes per element

  int64_t numel() const;
  bool is_contiguous() const;   // row-major dense (size-1 dimensions' strides ignored)
  // Row-major strides for `shape`.
  static std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
};

// Streaming hasher. Each update is length-prefixed, so ("ab","c") and ("a","bc") differ.
// Not thread safe; one instance per thread.
class ContentHasher {
 public:
  explicit ContentHasher(uint64_t seed = 0);
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;

  void update_field(std::string_view bytes);  // length then bytes
  void update_u64(uint64_t v);
  // dtype, rank, shape, then the elements' bytes in row-major order, whatever the strides.
  void update_tensor(const TensorView& t);
  Key digest() const;

 private:
  void update_raw(const void* p, size_t n);
  void* state_;                       // XXH3_state_t*, kept opaque to keep xxhash.h private
  std::vector<char> gather_buffer_;   // reused for non-contiguous tensors
};

// One-shot XXH3-128 of a byte string.
Key hash128(std::string_view bytes, uint64_t seed = 0);

}  // namespace recycle
