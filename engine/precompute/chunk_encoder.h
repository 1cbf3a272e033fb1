// ChunkEncoder: a chunk's samples in, its records out. It prepares the prefix (the model split
// at its split point, or another cache's blocks after its split point, on its device:
// prefix_runner.h), works out the manifest the build asks for (the record shape from a probe
// forward), and per chunk makes the prefix's inputs from the split's inputs (split_inputs.h),
// runs the prefix, checks the outputs' shape and encodes one record per computed key. The one
// part of a build that needs LibTorch; SplitBuild (build_stages.h) owns one, recycle-predict uses
// one for its misses, a distributed build's ranks one each.
//
// Not thread safe: used by the thread that runs the build's stages.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/manifest.h"
#include "engine/precompute/build_chunk.h"
#include "recycle/options.h"

namespace recycle {

class CacheInput;
class PrefixRunner;
class SplitInputs;
struct CacheBuildInputs;

class ChunkEncoder {
 public:
  // The prefix of o.model (with o.model.weights) split by o.recycle or o.split_at, prepared on
  // o.device in o.precision, over `inputs`' samples (images run the folded prefix, text the
  // plain one in eval mode); the manifest asked for records of the codec o.codec. Throws
  // std::invalid_argument for an empty prefix (--recycle 0).
  ChunkEncoder(SplitInputs& inputs, const BuildOptions& o);
  // Another cache's blocks after its split point over its decoded records (a derived level,
  // cache_input.h): `in` gives them, the head blob a new cache gets and the manifest asked for
  // (whose codec the records take); they run on o.device in the arithmetic that cache's prefix
  // ran in.
  ChunkEncoder(SplitInputs& inputs, const BuildOptions& o, CacheBuildInputs in);
  ~ChunkEncoder();
  ChunkEncoder(const ChunkEncoder&) = delete;
  ChunkEncoder& operator=(const ChunkEncoder&) = delete;

  // The manifest the build asks for: identity, record shapes, classes; no splits, no counts.
  const Manifest& requested() const { return requested_; }
  // The shape every output row must have, which records are cut by: the requested record
  // shape, until the cache's (SplitBuild::open) is set.
  void set_record_shape(std::vector<int64_t> shape) { record_shape_ = std::move(shape); }
  // The prefix on its device, with the prepared, split model (or the blocks).
  PrefixRunner& prefix() { return *prefix_; }

  // The prefix (no grad) on chunk->compute_pos, its outputs checked and encoded into
  // chunk->records, one per compute key: start then finish.
  void compute(BuildChunk* chunk);
  // compute in two halves, so that a build starts the next chunk's prefix before this one's
  // outputs are encoded (on a GPU the device computes it meanwhile: PrefixRunner::start):
  // start clears the records, makes the inputs and starts the prefix on them (nothing for a
  // chunk with nothing to compute); finish takes the outputs, checks their shape and encodes
  // the records. Chunks finish in the order they started.
  void start(BuildChunk* chunk);
  void finish(BuildChunk* chunk);

  // compute step by step. The prefix's input for chunk.compute_pos: float32 [m, C, H, W] on the
  // prefix's device (another cache's split: its decoded records; text: byte tokens int64
  // [m, L] of the texts as the keyer hashes them, L the chunk's longest; token ids: int64
  // [m, 2, L], token_id_batch's).
  torch::Tensor inputs(const BuildChunk& chunk);
  // The prefix on such inputs (no grad), checked: float32, contiguous, on the CPU; images
  // [m, ...record shape], text the packed features [m, L, D + 1] of engine/models/transformer.h
  // (std::runtime_error for another shape); its time added to prefix_seconds().
  torch::Tensor prefix_outputs(const torch::Tensor& inputs);
  // One record per row of such outputs, encoded by the codec, into chunk->records (text:
  // text_record_layout's, the valid positions only; CodecRangeError naming the sample for a
  // value the codec cannot hold).
  void encode(const torch::Tensor& outputs, BuildChunk* chunk);

  // Seconds of the prefix's forwards so far (PrefixRunner::last_seconds, summed).
  double prefix_seconds() const { return prefix_seconds_; }
  double encode_seconds() const { return encode_seconds_; }  // of finish, in encode
  // The prefix's share of a sample's forward through the whole model, measured on the first
  // chunks computed; negative when not measured (no model's head, or nothing computed).
  double prefix_share() const { return prefix_share_; }

 private:
  // The tokens per input of a text or token-id batch (0 for images).
  int64_t input_length(const torch::Tensor& in) const;
  // The prefix's outputs of m inputs (text: of `length` tokens), checked; its time counted.
  torch::Tensor checked(const torch::Tensor& out, int64_t m, int64_t length);
  // The head timed on up to 64 of a chunk's prefix outputs, against the prefix's time for the
  // chunk: prefix_share(). Done for the first two chunks computed (the second's figure stays:
  // the first pays one-time costs).
  void measure_prefix_share(const torch::Tensor& outputs);

  SplitInputs& inputs_;
  std::unique_ptr<PrefixRunner> prefix_;
  std::unique_ptr<CacheInput> cache_input_;  // a derived level's: the other cache's records
  Manifest requested_;
  std::vector<int64_t> record_shape_;
  Codec codec_ = Codec::kFp16;
  double prefix_seconds_ = 0;
  double encode_seconds_ = 0;
  double prefix_share_ = -1;
  int share_chunks_ = 0;  // chunks measure_prefix_share measured
};

}  // namespace recycle
