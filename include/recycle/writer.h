// Filling a cache split from a program that runs its own prefix (the Python package's
// recycle.build): the program hands over its samples' inputs a chunk at a time, in split order;
// the CacheWriter keys them (the cache's keyer), says which rows have no stored record, takes
// the program's prefix outputs for those rows, encodes them with the cache's codec and writes
// the chunk's records, index entries and counts in one batch, as recycle-build's chunks are
// written (engine/precompute/build_stages.h). So a killed build resumes (the index that
// survived is compared position by position, and only what is missing is computed), a rerun
// on the same samples writes nothing, and a cache made for another identity is refused
// (StaleCacheError naming what differs). The cache is the same format as recycle-build's:
// recycle-inspect --verify checks it, SplitReader reads it.
//
// Tensors are LibTorch's at::Tensor, declared here only: include <torch/torch.h> where they are
// used. Errors: InvalidArgument (bad options, outputs that do not fit the layout, a value the
// codec cannot store), StaleCacheError, std::runtime_error (storage, another writer); one line.
// Not thread safe: one thread drives a CacheWriter. Dropping it before finish() leaves the split
// incomplete, as a killed build does (a new CacheWriter resumes it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "recycle/build.h"  // BuildReport

namespace at {
class Tensor;
}  // namespace at

namespace recycle {

// The largest label a sample may carry: a class id is 0 to kMaxClassId (a label names a class,
// and a cache's class names grow to the largest label). One rule for every source of labels:
// recycle-build --data npy: (engine/data/source_npy.cc) and the Python package's recycle.build.
constexpr int64_t kMaxClassId = 1000000;

// "" when `label` is a class id, else the one-line reason naming it and its sample: "label L of
// sample I is not a class id (0 to 1000000)".
inline std::string class_id_problem(int64_t label, int64_t sample) {
  if (label >= 0 && label <= kMaxClassId) return "";
  return "label " + std::to_string(label) + " of sample " + std::to_string(sample) +
         " is not a class id (0 to " + std::to_string(kMaxClassId) + ")";
}

// One tensor of the records: its name, dtype and shape per sample, fixed, or with a variable
// first dimension (-1, kVariableDim: a sequence's tokens, cut per row by write_chunk's lengths).
// float32 tensors are stored with the writer's codec, the others exactly.
struct WriterTensor {
  std::string name;
  Dtype dtype = Dtype::kFloat32;
  std::vector<int64_t> shape;
};

struct WriterOptions {
  std::string cache_dir;
  std::string split = "train";
  // What the samples are (kept as the split's "data"): a rerun with another description
  // rewrites the split's index even when every key matches.
  std::string data;
  int64_t samples = 0;  // samples the split (or the shard) will hold, >= 1
  // One shard of a sharded build (the Python package's recycle.build(..., sharded=True)), as
  // recycle-build --sharded makes it: this cache holds shard `shard.index` of `shard.count`
  // (count 0: the whole split). add_chunk then takes the whole split's chunks, in split order,
  // and keeps the rows whose key the shard rule puts in this shard (shards_of_rows below);
  // `samples` is the shard's count, `shard.split_samples` the whole split's, and the split's
  // manifest entry records the shard (its rule the writer's). A stored split of another shard
  // is refused (stale).
  SplitShard shard;
  // label -> name. When given, a label outside them is refused; else the names grow with the
  // labels ("0".."K").
  std::vector<std::string> class_names;
  // The identity (manifest.h): every field must match a stored cache's.
  std::string model;        // what computes the records, e.g. "python:MyPrefix"
  std::string fingerprint;  // of the prefix's weights (tensors_fingerprint)
  std::string split_at = "prefix";
  std::string keyer = "xxh3";  // a keyer spec (keyer.h) that keys a tensor (or an id: the position)
  Codec codec = Codec::kFp16;  // of the float32 tensors
  std::string preprocess = "none";
  std::vector<int64_t> input_shape;  // one sample's input shape
  std::vector<WriterTensor> layout;  // what each record holds, in order
  Compression compression = Compression::kNone;  // RocksDB's (not part of the identity)
  bool rebuild = false;              // delete the cache first (only a directory that is a cache)
  // Chunks are written without RocksDB's write-ahead log, as recycle-build's are: a kill loses
  // those not yet flushed to table files. A flush follows the chunk that ends each period of
  // this many seconds, so a kill loses at most about that much of the prefix's work (0: a
  // flush after every chunk).
  double flush_seconds = 10;
  // Optional: the records are the prefix of a model the engine knows, split after the block
  // named engine_split_at: an encoder spec (engine_model, e.g. "torchscript:FILE" for a scripted
  // nn.Sequential, "resnet18:width=4") or a weights file of recycle-train --save-model
  // (engine_weights), made as recycle-build makes it (ModelOptions, options.h). The identity is
  // then the engine's (model spec, its prefix's fingerprint, split point: model, fingerprint and
  // split_at above are not used), a new cache gets the head's initial weights as recycle-build
  // stores them, and recycle-train --cache trains it. The outputs the program hands over for
  // the first rows it computes are compared with the engine's prefix on the same inputs; a
  // difference beyond 1e-3 (relative to the largest value) is refused: another model.
  // class_names are required (the head's classifier).
  std::string engine_model;
  std::string engine_weights;
  std::string engine_split_at;

  // Checks what needs no file: a cache directory, at least one sample, the shard's fields, a
  // model named, flush_seconds a number >= 0, the split's name, the keyer spec, the layout (at least one
  // tensor, dimensions >= 1, distinct names), and an engine model's class names and split
  // point. Throws InvalidArgument with one line naming the option. CacheWriter starts with the
  // same checks. (engine/options/writer_validate.cc)
  void validate() const;
};

// The names the edges (the Python package) give the typed fields above, parsed with the one-line
// messages the writer's users see; each throws InvalidArgument.
// "unknown codec 'fp8' (known: fp32, fp16, bf16, int8)"
Codec parse_writer_codec(std::string_view name);
// "unknown compression 'zip' (known: none, lz4, zstd)"
Compression parse_writer_compression(std::string_view name);
// "tensor 'x' has dtype 'float64'; records hold float32, int64, int32, uint8 or bool"
Dtype parse_writer_dtype(const std::string& tensor, std::string_view dtype);

// One sample's input as named tensors of any shapes (a tokenizer's output for one text:
// input_ids, attention_mask, ...).
using NamedTensors = std::map<std::string, at::Tensor>;

class CacheWriter {
 public:
  // Checks the options, opens (or creates) the cache as its only writer and compares its
  // identity with the options'. Reads the split's stored index (to resume).
  explicit CacheWriter(const WriterOptions& options);
  ~CacheWriter();
  CacheWriter(const CacheWriter&) = delete;
  CacheWriter& operator=(const CacheWriter&) = delete;

  // The next chunk of samples, positions [position(), position() + n): their inputs
  // `inputs` [n, ...input_shape] (any dtype, CPU; each row keyed with its dtype and shape) and
  // labels int64 [n]. Returns the rows whose record must be computed: one row per distinct key
  // of the chunk that has no stored record, in row order. write_chunk must follow.
  std::vector<int64_t> add_chunk(const at::Tensor& inputs, const at::Tensor& labels);
  // The same for samples whose inputs are texts, keyed by the cache's keyer (a text keyer,
  // "text[:space][,lower]", or "id"), or named tensors, keyed ("xxh3") by every tensor's name,
  // dtype, shape and bytes, in name order, or by position ("id"). Not with an engine model.
  std::vector<int64_t> add_text_chunk(const std::vector<std::string>& texts,
                                      const at::Tensor& labels);
  std::vector<int64_t> add_named_chunk(const std::vector<NamedTensors>& samples,
                                       const at::Tensor& labels);
  // The prefix's outputs for the rows add_chunk returned, in that order: per layout tensor one
  // tensor [m, ...shape] (any floating dtype for a float32 tensor; the exact dtypes as
  // declared). Writes the chunk's records and index entries (only those that differ from the
  // stored index) with the manifest's counts in one batch; nothing when none differs.
  // A layout tensor with a variable first dimension comes padded, [m, L, ...], and row r is
  // stored cut to its first lengths[r] (1 to L) positions: `lengths` holds one per computed
  // row when the layout has such a tensor (all of them cut alike), and is empty otherwise.
  void write_chunk(const std::vector<at::Tensor>& outputs,
                   const std::vector<int64_t>& lengths = {});
  // Marks the split complete after its last chunk (InvalidArgument unless exactly `samples`
  // samples came) and flushes. Writes nothing when the split was complete with the same
  // samples, data and classes already.
  BuildReport finish();

  // A shard's writer given its shard's samples only (a key pass found every sample's shard, and
  // each rank read only its own: recycle.build(..., sharded=True)): `n` samples of the split
  // that are in other shards and will not come, counted as the split's for finish's check.
  // InvalidArgument for a writer of the whole split, n < 0 or more samples than the split's.
  // Not with the "id" keyer, which keys the chunks' split positions: give it the whole split.
  void skip_other_shards(int64_t n);

  int64_t position() const;  // samples added so far
  // Whether the stored split was complete with an index the chunks so far matched entry for
  // entry (a rerun that will write nothing, so far).
  bool unchanged_so_far() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// XXH3-128 hex of named tensors (a state_dict), hashed as the engine hashes a module's
// parameters and buffers for a cache's fingerprint: name, dtype, shape and bytes, in order.
std::string tensors_fingerprint(const std::vector<std::string>& names,
                                const std::vector<at::Tensor>& tensors);

// Where the rows of a chunk go in a sharded build (WriterOptions::shard): rows of
// `inputs` (the batch as dimension 0) at split positions first, first + 1, ... keyed by
// `keyer` (a spec) as a CacheWriter keys them; `shards` holds each row's shard of
// `shard_count` (cache/shard_rule.h) and `keys` the rows' keys (Key::to_bytes, 16 bytes each)
// end to end, in order: with the labels, what a KeysDigest (keys_digest.h) takes, so that ranks
// can check they key the same samples. InvalidArgument for a bad keyer spec, shard count or
// input.
struct RowShards {
  std::vector<int64_t> shards;
  std::string keys;
};
RowShards shards_of_rows(const std::string& keyer, const at::Tensor& inputs, int64_t first,
                         int64_t shard_count);
// The same for a chunk of texts (as add_text_chunk keys them) and of samples of named tensors
// (add_named_chunk).
RowShards shards_of_texts(const std::string& keyer, const std::vector<std::string>& texts,
                          int64_t first, int64_t shard_count);
RowShards shards_of_named(const std::string& keyer, const std::vector<NamedTensors>& samples,
                          int64_t first, int64_t shard_count);

}  // namespace recycle
