// AdaComp gradient compression (Chen et al., "AdaComp: Adaptive Residual Gradient Compression
// for Data-Parallel Distributed Training", AAAI 2018), the "topk" communication hook.
//
// Per bucket, every step:
//   G = residue + grad           (error feedback: what was not sent before is sent later)
//   H = G + grad                 (the gradient counted twice: what is growing now goes first)
//   in each bin of `bin` consecutive elements, gmax = max |G| over the bin, and the elements
//   with |H| >= gmax are sent (at least the bin's largest |G| unless the gradient pulls it back;
//   a bin whose G is all zero sends nothing)
//   sent values are quantised (below); residue = G - quantised value where sent, G elsewhere.
//
// Encoding: two bytes per sent element, in ascending index order: the gap from the previous
// sent element (the first counts from -1) in 1..255, and an 8-bit code: a sign bit and 7 bits k
// of log-magnitude, value = +-scale * 2^(-k/8), where `scale` is the largest sent |G| of the
// bucket (one float per bucket and rank). A longer gap is preceded by skip pairs (0, m - 1),
// each advancing by 255 m (m <= 256); AdaComp sends something from nearly every bin, so skips
// are rare at bins of a few hundred. Against a 24-bit index and 8-bit code in 32 bits this
// halves the bytes; a log code keeps every sent value within 4.4% (2^(1/16) - 1) over 16
// octaves below the scale, so a bucket that mixes large weight gradients with small bias or
// norm gradients sends both, where a linear 8-bit code or sign times scale would send the small
// ones as zero or far too large. Values more than 2^(-127/8) below the scale are not sent (they
// stay in the residue). Buckets hold at most 2^31 - 1 elements.
//
// No LibTorch here except the process group's forward declaration; the selection, quantisation
// and decoding are plain functions over floats, testable without a process group.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace c10d {
class ProcessGroup;
}

namespace recycle {

class CommHook;

// Bin length for the selection, measured by the disabled tests of
// tests/distributed/comm_hook_test.cc. Bytes sent per 100 elements of a width-16 ResNet-18 head's
// gradients (40 SGD steps): 21.4 at bin 50, 12.8 at 100, 7.9 at 200, 4.3 at 500, 2.8 at 1000 (fp32:
// 400). Test accuracy of that head (encoder from a `recycle-bench --quick` run) on Fashion-MNIST
// 5-9, two ranks, 4 epochs: none 0.9618 / 0.9618 / 0.9610 (seeds 0, 1, 2), bin 200 0.9590 / 0.9602
// / 0.9570 at 64x, bin 100 0.9624 (seed 1) at 33x, bin 500 0.9556 (seed 0) at 140x. 200 is the
// shortest bin that clears 40x, and it stayed within 0.5 points.
constexpr int64_t kAdaCompDefaultBin = 200;
// Largest bucket (elements): its packet's byte count must fit the int32 header.
constexpr int64_t kAdaCompMaxElements = int64_t{1} << 28;

// The AdaComp rule on one bin: appends to `picked` offset + i for every i < n with
// |H[i]| >= max_j |G[j]|, unless that maximum is 0 (nothing to send) or not finite.
void adacomp_select_bin(const float* G, const float* H, int64_t n, uint32_t offset,
                        std::vector<uint32_t>* picked);

// The 8-bit code of `value` against `scale` (> 0, finite): sign bit 0x80, k = round(-8 log2
// (|value| / scale)) clamped at 0 in the low 7 bits. Returns false (nothing to send) when value
// is 0 or k > 127.
bool adacomp_quantise(float value, float scale, uint8_t* code);
float adacomp_dequantise(uint8_t code, float scale);

// Appends the element `index` with `code` to `bytes`; `last` is the previous element's index
// (-1 before the first) and becomes `index`. Indices must ascend.
void adacomp_encode(int64_t index, uint8_t code, int64_t* last, std::vector<uint8_t>* bytes);

// Calls fn(index, code) for every element of an encoded packet (`size` bytes). Throws
// std::runtime_error when an index is >= n or size is odd (a peer sent a packet for another
// bucket shape, or garbage).
template <class Fn>
void adacomp_for_each(const uint8_t* bytes, int64_t size, int64_t n, Fn&& fn);

// What one rank sends for one bucket. scale is NaN when the bucket's G was not finite (every
// rank then fills the bucket's result with NaN, so the trainer's non-finite check stops the job
// on every rank alike instead of a NaN hiding in a residue).
struct AdaCompPacket {
  float scale = 0.0f;
  std::vector<uint8_t> bytes;  // adacomp_encode's pairs
  int64_t elements = 0;        // how many elements the pairs carry (skips not counted)
};

// Adds the decoded packet to out[0..n). Throws as adacomp_for_each.
void adacomp_decode_add(const uint8_t* bytes, int64_t size, float scale, float* out, int64_t n);

// The per-bucket state (residues, keyed by bucket index) and the compression step. Not thread
// safe: one caller at a time (the hook's communication thread).
class AdaCompCompressor {
 public:
  explicit AdaCompCompressor(int64_t bin = kAdaCompDefaultBin);

  // Compresses `grad` (n floats) for `bucket` into `out` and updates the bucket's residue (zero
  // the first time a bucket is seen). Throws std::invalid_argument when n differs from the
  // bucket's earlier size or exceeds kAdaCompMaxElements.
  void compress(int64_t bucket, const float* grad, int64_t n, AdaCompPacket* out);

  // The bucket's residue (what has not been sent yet), nullptr for a bucket never compressed.
  const std::vector<float>* residue(int64_t bucket) const;
  int64_t bin() const { return bin_; }

 private:
  int64_t bin_;
  std::unordered_map<int64_t, std::vector<float>> residues_;
  std::vector<float> g_, h_;      // scratch: G and H of the current bucket
  std::vector<uint32_t> picked_;  // scratch: selected indices
};

// The "topk" hook: AdaComp compression, exchanged with two allgathers per bucket (each rank's
// byte count and scale, 8 bytes; then the bytes padded with zeros to the largest count,
// skipped when every count is 0), summed in rank order into a dense bucket on every rank (so all
// ranks get bit-identical results) and divided by the world size. bytes_sent counts both
// allgathers' inputs, padding included. `compressor` may be shared with the caller (to read
// residues); null makes a private one with the default bin. reduce() is not thread safe (one
// communication thread at a time).
std::unique_ptr<CommHook> make_adacomp_hook(
    c10::intrusive_ptr<c10d::ProcessGroup> group,
    std::shared_ptr<AdaCompCompressor> compressor = nullptr);

void adacomp_throw_bad_packet(int64_t index, int64_t size, int64_t n);

template <class Fn>
void adacomp_for_each(const uint8_t* bytes, int64_t size, int64_t n, Fn&& fn) {
  if (size % 2 != 0) adacomp_throw_bad_packet(-1, size, n);
  int64_t index = -1;
  for (int64_t i = 0; i < size; i += 2) {
    if (bytes[i] == 0) {
      index += 255 * (int64_t{bytes[i + 1]} + 1);
      continue;
    }
    index += bytes[i];
    if (index >= n) adacomp_throw_bad_packet(index, size, n);
    fn(index, bytes[i + 1]);
  }
}

}  // namespace recycle
