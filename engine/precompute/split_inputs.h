// SplitInputs: what a build reads of one split, before any model or cache: the dataset (images
// streamed: engine/data/image_stream.h), the keyer, the augmented views, and the keys. A
// SplitBuild (build_stages.h) owns one; recycle-predict keys and reads its samples through one
// too; the chunk encoder (chunk_encoder.h) takes a chunk's samples from it.
//
// The images of a streamed split are read twice: key_all reads them a chunk at a time to key
// every sample (memory holds keys, labels and ids, never the split's images), and the chunk
// loop reads them a second time for the samples it computes (ChunkReader, a chunk ahead, or
// the inputs' own stream). A sharded build's rank keys only its part of the split
// (key_positions) and takes the other ranks' keys for the rest (settle_keys), so it reads a
// folder's files of its part and then of its shard only. The second read is checked against
// the keys the chunk computes, so a file changed in between stops the build instead of storing
// one image's record under another's key.
//
// No LibTorch here. Not thread safe, except that a ChunkReader reads on its thread through a
// stream of its own.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache/activation_store.h"  // IndexEntry
#include "engine/data/augment.h"
#include "engine/data/dataset.h"
#include "engine/data/image_stream.h"
#include "engine/precompute/build_chunk.h"
#include "recycle/key.h"
#include "recycle/keyer.h"

namespace recycle {

// The keys of some samples of a split (SplitInputs::key_positions), as the ranks of a sharded
// build exchange them: keys[i] is the key of sample positions[i] (zeros for a skipped file's),
// `skipped` the samples among them whose file could not be decoded (--on-bad-file skip),
// ascending, each with one line naming the file.
struct SampleKeys {
  std::vector<int64_t> positions;
  std::vector<Key> keys;
  std::vector<std::pair<int64_t, std::string>> skipped;
};

class SplitInputs {
 public:
  // Loads the split `data` names (images streamed), makes the keyer (`keyer_spec`, "" for the
  // data's default) and, with views > 0, parses `augment`. Throws std::invalid_argument /
  // std::runtime_error with one line: views of text or of float inputs, a text the keyer's
  // normalisation empties, and load_dataset's own errors.
  SplitInputs(const DatasetOptions& data, const std::string& keyer_spec,
              const std::string& augment, int64_t views);
  // Another cache's split as the samples (a derived level: cache_input.h, whose CacheInput the
  // chunk encoder reads): its `index` (keys and labels), `description` (what that split was
  // built from), `classes` (the --classes filter it was built with) and its class names; no
  // pixels, no texts.
  SplitInputs(std::vector<IndexEntry> index, std::string description, std::string classes,
              std::vector<std::string> class_names);
  ~SplitInputs();
  SplitInputs(const SplitInputs&) = delete;
  SplitInputs& operator=(const SplitInputs&) = delete;

  const Dataset& data() const { return data_; }  // without pixels when streamed
  const StreamedImages& streamed() const { return streamed_; }
  const Keyer& keyer() const { return *keyer_; }  // not for another cache's split
  // Augmented views per sample (0: none) and their augmentation.
  int64_t views() const { return views_; }
  const Augment& augment() const { return augment_; }
  // The samples are another cache's records (the constructor from an index).
  bool from_cache() const { return from_cache_; }
  // Samples per chunk of `batch` records: batch divided by the views (at least 1), so that a
  // chunk's prefix forward holds about `batch` images either way.
  size_t chunk_size(int64_t batch) const;

  // Keys every sample (in parallel; a streamed split read a chunk at a time and checked to its
  // end as load_dataset checks it; another cache's split: its index's keys). Files that could
  // not be decoded (--on-bad-file skip) are left out with their samples, said on stderr and
  // counted by files_left_out(); every file left out is an error.
  std::vector<Key> key_all();
  int64_t files_left_out() const { return files_left_out_; }
  // The keys of the samples `positions` only (ascending, distinct, in range), in parallel: of a
  // streamed folder only their files are read (an IDX file is read through). A file that could
  // not be decoded is not dropped here: it is in the result's `skipped`. Not for another cache's
  // split.
  SampleKeys key_positions(std::vector<int64_t> positions);
  // key_all's result from every sample's keys gathered from parts (`whole.positions` 0..n-1 for
  // the data's n samples: std::invalid_argument otherwise): the skipped files' samples dropped,
  // said on stderr and counted by files_left_out(), as key_all does.
  std::vector<Key> settle_keys(SampleKeys whole);
  // Keeps only the samples `positions` (ascending, distinct), after key_all: a sharded build's
  // shard (SplitBuild::open). Not for another cache's split.
  void keep_only(const std::vector<int64_t>& positions);
  // Keys of the samples positions[0, n) into *keys (the keys key_all gives them): from
  // chunk.pixels when a ChunkReader read them, else from the dataset in memory, else read
  // from a stream of the inputs' own. Not for another cache's split.
  void key_samples(const BuildChunk& chunk, const int64_t* positions, int64_t n,
                   std::vector<Key>* keys);

  // The images of the chunk's records to compute, as image_batch (engine/models/preprocess.h)
  // takes them: the returned dataset's rows *rows, one per compute_pos. Samples in memory
  // without views: the dataset itself and compute_pos. Else `read` filled with the samples
  // (from chunk.pixels or the inputs' stream), each augmented as its view, rows 0..m; their
  // content checked against compute_keys first (std::runtime_error naming the sample when a
  // file changed since it was keyed).
  const Dataset& compute_images(const BuildChunk& chunk, Dataset* read, std::vector<int64_t>* rows);
  // The texts of the chunk's records to compute, as the keyer hashes them (its normalisation
  // applied): samples that share a key share a record that is a function of the key.
  std::vector<std::string> compute_texts(const BuildChunk& chunk) const;

  // The cache's class names in place of the data's (a split may hold fewer classes than the
  // cache's first split: its labels take the cache's ids). Throws for a class the cache lacks.
  void adopt_class_names(const std::vector<std::string>& names, const std::string& split,
                         const std::string& where);
  // The split's samples with their pixels in memory (the samples loaded here, loaded whole):
  // the chunks read them there instead of streaming the file again.
  void use_samples_in_memory(Dataset whole);

 private:
  friend class ChunkReader;
  // The samples `positions` (ascending) of a chunk whose pixels a ChunkReader read.
  Dataset read_samples_of(const BuildChunk& chunk, const std::vector<int64_t>& positions) const;
  // The samples `positions` (ascending, distinct), read from the chunk, the stream or memory.
  Dataset samples_at(const BuildChunk& chunk, const std::vector<int64_t>& positions);
  ImageStream& own_stream();

  Dataset data_;             // without pixels when streamed_.streamed()
  StreamedImages streamed_;  // where data_'s pixels are
  std::unique_ptr<Keyer> keyer_;
  Augment augment_;  // parsed (views_ > 0)
  int64_t views_ = 0;
  int64_t files_left_out_ = 0;
  bool from_cache_ = false;
  std::vector<Key> cache_keys_;  // from_cache_: the index's keys, until key_all hands them over
  std::unique_ptr<ImageStream> images_;  // the second pass over streamed images, when needed
};

// Reads the images of a streamed image split a chunk ahead, on a thread of its own: read(c)
// waits for chunk c's pixels (rethrowing the read's error), moves them into c->pixels and
// c->pixel_pos, and starts reading the chunk after c. Chunks are the consecutive ranges of
// `todo` of `chunk_size` positions, read in order. A split that is not streamed (text, or pixels
// in memory) is left alone: read does nothing. The destructor waits for a read under way (its
// error dropped). `inputs` and `todo` must outlive the reader and not change meanwhile.
class ChunkReader {
 public:
  ChunkReader(const SplitInputs& inputs, const std::vector<int64_t>& todo, size_t first,
              size_t chunk_size);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;
  void read(BuildChunk* chunk);

 private:
  void start(size_t begin);  // reads todo[begin, begin + chunk_size) on the thread

  const SplitInputs& inputs_;
  const std::vector<int64_t>& todo_;
  const size_t chunk_size_;
  std::unique_ptr<ImageStream> stream_;
  size_t ahead_begin_ = 0;  // todo position of the chunk being read ahead
  std::future<std::vector<uint8_t>> ahead_;
};

}  // namespace recycle
