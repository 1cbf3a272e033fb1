// Reading a cache split from a program (the Python package's recycle.CachedDataset and
// recycle.CachedLoader are these): SplitReader gives the samples at any positions, in the order
// the split was built; CacheLoader gives batches in a seeded, per-rank order (DistributedSampler
// semantics, engine/data/sampler.h), decoded ahead on a background thread; KeyedReader gives the
// records of a batch of inputs by their keys. All open the cache read-only: safe beside a
// running build (they see the batches written before they opened).
//
// Tensors are LibTorch's at::Tensor, declared here only: include <torch/torch.h> (or
// <torch/extension.h>) where they are used. What a read gives: per tensor of the cache's record
// layout (RecordLayout, cache/record_layout.h; an image cache has one, "activation"), a tensor
// [n, ...per-sample shape] on the CPU, float32 decoded from the codec (fp16, bf16 and int8 are
// within their rounding of what was stored), the exact dtypes (int64, int32, uint8, bool) as
// stored, variable dimensions padded with zeros to the batch's longest; and the labels, int64 [n].
//
// Errors: InvalidArgument (errors.h) for bad options, std::runtime_error for a directory that
// is no cache, a missing or incomplete split (unless allow_partial), CorruptRecordError for a
// record that fails its checks. Each message is one line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace at {
class Tensor;
}  // namespace at

namespace recycle {

struct ReaderOptions {
  std::string cache_dir;
  std::string split = "train";
  bool allow_partial = false;  // read a split whose build has not finished (what it holds so far)
  // RocksDB's block cache for this reader, MiB: with the index (24 bytes a sample) and the
  // batches held, what reading costs in memory, however large the cache is. It fills as records
  // are read: a split smaller than it costs its own size. SplitReader's default is small, for
  // DataLoader workers that each open one; CacheLoader's is larger (below).
  int64_t block_cache_mb = 32;

  // Checks what needs no file: the split's name, a cache directory, block_cache_mb at least 1.
  // Throws InvalidArgument with one line naming the field. SplitReader starts with it.
  // (engine/options/reader_validate.cc)
  void validate() const;
};

// One split, by position. Thread safe: reads from several threads are served one at a time.
class SplitReader {
 public:
  explicit SplitReader(const ReaderOptions& options);
  ~SplitReader();
  SplitReader(const SplitReader&) = delete;
  SplitReader& operator=(const SplitReader&) = delete;

  int64_t size() const;                        // samples in the split
  std::vector<std::string> tensor_names() const;  // the record layout's, in order
  std::string manifest_json() const;           // the cache's manifest, as stored
  const std::vector<int64_t>& labels() const;  // labels()[i]: sample i's label
  bool complete() const;                       // the split's build finished

  // Samples positions[0..n) (each in [0, size()), repeats allowed; std::out_of_range otherwise):
  // (*tensors)[j] is the layout's tensor j, [n, ...]; *labels int64 [n]. Fresh tensors: the
  // caller owns them.
  void read(const int64_t* positions, int64_t n, std::vector<at::Tensor>* tensors,
            at::Tensor* labels);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct LoaderOptions {
  // block_cache_mb 256 by default (recycle-train's --memory-budget default): a split up to that
  // size is read from memory after the first epoch, as fast as tensors held in memory; a larger
  // one is read from its files for what the cache does not hold.
  LoaderOptions() { reader.block_cache_mb = 256; }
  ReaderOptions reader;
  int64_t batch_size = 128;
  bool shuffle = true;  // a permutation per epoch, seeded by (seed, epoch); else the split's order
  uint64_t seed = 0;
  int rank = 0;         // this process's share: every world_size-th sample of the epoch's order,
  int world_size = 1;   // from rank (padded with the first samples to a multiple of world_size)
  bool drop_last = false;  // drop the rank's last batch when it is short
  // A rank reading its own shard of a sharded cache (recycle-build --sharded; rank 0 and
  // world_size 1 here): each epoch takes this many samples, so that every rank takes as many
  // batches (recycle.CachedLoader gives ceil(the shards' samples / the ranks): a shared cache's
  // share): the first of its shuffled shard when fewer than the shard (the rest wait for a later
  // epoch's order), else the shard and then the first of that order again. 0: the shard once.
  int64_t epoch_samples = 0;
  // Batches decoded ahead on a background thread (engine/train/prefetch.h); 0: each batch is
  // read on the calling thread when it is asked for.
  int64_t prefetch = 2;
  // Records as long as the text: each epoch's order grouped by length as transformers'
  // group_by_length groups it (grouped_by_length, engine/data/sampler.h), so that a batch's
  // samples are of similar length and pad little. The lengths are read when the loader opens:
  // every record of the split once (its header parsed, nothing decoded). InvalidArgument for a
  // split whose records are all of one shape.
  bool group_by_length = false;
  // Batches in page-locked host memory, a new block each (LibTorch's caching host allocator),
  // so that the caller's copy to a GPU (.to("cuda", non_blocking=True)) runs asynchronously.
  // Needs a GPU: InvalidArgument without one.
  bool pin_memory = false;
  // Where the batches are handed out: "cpu", "cuda" or "cuda:N". On a GPU the loader does the
  // copy: batches pinned on the host, copied with non_blocking on the loading thread, and the
  // float tensors of a compact codec (fp16, bf16, int8) sent as stored and widened on the GPU
  // (engine/train/compact_batch.h). InvalidArgument for a device this process cannot use.
  std::string device = "cpu";

  // The reader's options, batch_size at least 1, prefetch at least 0, world_size at least 1
  // with rank in 0..world_size-1, and a device this process can use (usable_device_name); what
  // needs the split (enough samples for the ranks) and a GPU for pin_memory are checked when
  // the loader opens it. Throws InvalidArgument with one line naming the field. CacheLoader
  // starts with it. (engine/options/reader_validate.cc)
  void validate() const;
};

// The rule of every device a program names (LoaderOptions::device, the tools' --device): "cpu",
// "cuda" or "cuda:N" that this process can use. Returns `name` when it is one; else throws
// InvalidArgument, one line naming `option` (another spelling such as "cpu:0", no CUDA in this
// LibTorch, no GPU visible, cuda:N past the GPUs). The Python package checks its devices with it.
std::string usable_device_name(const std::string& name, const std::string& option = "device");

// Batches of one split in the order of a Sampler. A split built with K augmented views
// (recycle-build --views K) gives one view of every sample per epoch, as recycle-train reads it;
// SplitReader gives view 0. Not thread safe (one consumer).
class CacheLoader {
 public:
  explicit CacheLoader(const LoaderOptions& options);
  ~CacheLoader();
  CacheLoader(const CacheLoader&) = delete;
  CacheLoader& operator=(const CacheLoader&) = delete;

  int64_t size() const;             // samples in the split
  int64_t samples_per_rank() const; // samples this rank sees per epoch (before drop_last)
  int64_t batches() const;          // batches per epoch on this rank
  std::vector<std::string> tensor_names() const;
  std::string manifest_json() const;

  // Starts `epoch`: its order is drawn and the first batches start loading. first_batch > 0
  // resumes the epoch there: the batches it gives are the epoch's from that one on, the same
  // samples in the same order, and the ones before it are not read. InvalidArgument for a
  // negative epoch, or a first_batch outside 0..batches().
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The epoch's next batch, as SplitReader::read gives one; false after its last. The tensors
  // are the caller's to keep: the loader decodes into a buffer again only when nothing else
  // refers to it.
  bool next(std::vector<at::Tensor>* tensors, at::Tensor* labels);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Records by content, for inference from the cache in a program (the Python package's
// recycle.CachedPrefix is this): a batch of inputs is keyed by the cache's own keyer exactly as
// a program's build keys them (CacheWriter::add_chunk: each row's dtype, shape and bytes;
// add_text_chunk: each text; add_named_chunk: each sample's named tensors), and the keys are
// looked up with one MultiGet, whatever split stored them. The caller runs its prefix on the
// misses. Opens the cache read-only. Thread safe: lookups are served one at a time. Refused
// (InvalidArgument): a cache keyed by sample id (its keys say nothing of content).
// The inputs must be what the build keyed: recycle-build keys images as read (uint8 pixels
// before preprocessing), so preprocessed float32 images of such a cache all miss; a program's
// build (CacheWriter) keys the tensors it was given.
class KeyedReader {
 public:
  KeyedReader(const std::string& cache_dir, int64_t block_cache_mb = 32);
  ~KeyedReader();
  KeyedReader(const KeyedReader&) = delete;
  KeyedReader& operator=(const KeyedReader&) = delete;

  std::vector<std::string> tensor_names() const;  // the record layout's, in order
  std::string manifest_json() const;              // the cache's manifest, as stored
  // inputs: [n, ...] with the batch as dimension 0 (any device; a per-sample shape other than
  // the cache's input shape is InvalidArgument). (*tensors)[j] is the layout's tensor j
  // [n, ...] on the CPU, the hits' rows decoded (as SplitReader::read decodes them), the
  // misses' rows zero; *hits is bool [n]. Fresh tensors: the caller owns them. A cache whose
  // records vary in shape (records as long as the text) is InvalidArgument: its inputs were
  // texts or named tensors.
  void lookup(const at::Tensor& inputs, std::vector<at::Tensor>* tensors, at::Tensor* hits);
  // The same for texts and for samples of named tensors (any shapes, on any device), keyed as
  // the build keyed them. Records of a varying first dimension (as long as the text) come padded
  // at its end with zeros to the longest hit of the batch (a mask's padding is 0).
  void lookup_texts(const std::vector<std::string>& texts, std::vector<at::Tensor>* tensors,
                    at::Tensor* hits);
  void lookup_named(const std::vector<std::map<std::string, at::Tensor>>& samples,
                    std::vector<at::Tensor>* tensors, at::Tensor* hits);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace recycle
