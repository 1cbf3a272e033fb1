// The build of a cache split as named stages over one BuildState, so tests can run them one
// by one. run_build (build_pipeline.h) is load_inputs then run_loaded_build, these calls in
// this order:
//
//   BuildState s(options);
//   load_inputs(s);         options checked, dataset (images streamed), keyer, model prepared
//                           (a build from another cache: load_cache_input, cache_input.h)
//   -- run_loaded_build(s): --
//   key_samples(s);         first pass over the images: every sample keyed, chunk by chunk
//   reconcile_manifest(s);  cache opened or created; its identity compared, a mismatch refused
//   plan_split(s);          keys, what the stored index holds already, what is left to write
//   if (!s.unchanged) {
//     begin_split(s);       the split marked incomplete (the manifest, a shorter index cut)
//     BuildChunk c;
//     ChunkReader reader(s);
//     ChunkWriter writer(s);
//     while (next_chunk(s, &c)) {
//       find_missing(s, &c);   distinct keys of the chunk with no stored record (MultiGet)
//       reader.read(&c);       the chunk's images, read on the reader's thread while the chunk
//                              before computed; it starts reading the next chunk's
//       compute_chunk(s, &c);  prefix forward (inference form), output shape checked, encoded
//       writer.submit(stage_write(s, &c));  one write batch: records, index entries, counts,
//                              written on the writer's thread while the next chunk computes
//     }
//     writer.finish();      the last batch written (rethrows a write's error)
//     finish_split(s);      the split marked complete, memtables flushed
//   }
//   return build_report(s);
//
// write_chunk(s, &c) is stage_write then write_staged on the calling thread: the same writes.
// Batches reach the store in chunk order, so what a crash leaves is what the serial loop
// leaves. Chunks are written without the write-ahead log (ActivationStore::write_unlogged): a
// crash loses those since the last memtable flush, a prefix of the chunks survives, and the
// rerun computes the rest. The writer holds at most one batch: memory is two chunks' records
// at most. The reader holds the images of one chunk ahead (gzip inflation is serial: read on the
// chunk loop's thread it left the cores idle for about 5% of a build).
//
// Each stage throws std::runtime_error / std::invalid_argument with one clear line, as
// run_build does. A state whose chunk loop stopped midway (or a killed process) leaves a
// cache that a new state resumes: plan_split starts from what the stored index holds.
//
// The images are streamed (engine/data/image_stream.h): load_inputs reads the labels and the
// images' header, key_samples reads the images once, a chunk at a time, to key every sample
// (16 bytes each: the split's unique count goes into the manifest's first write and a rerun
// must compare every key with the index before deciding to write nothing), and compute_chunk
// reads them a second time, forward, for the samples it computes. Memory holds the keys,
// labels and ids, never the split's images. key_samples runs before the cache is opened, so
// bad input fails before the cache is touched. A state whose s.data has its pixels in memory
// (s.streamed.file empty) reads them there.
//
// No LibTorch here: the prepared model is behind BuildModel, defined in build_stages.cc; the
// records come from its InferencePrefix (engine/models/inference_prefix.h: batch norms folded,
// within kInferencePrefixTolerance of the plain prefix, whose weights make the identity).
// Not thread safe: one thread runs the stages of a state, except write_staged, which a
// ChunkWriter runs on its thread while that one thread runs find_missing and compute_chunk of
// the next chunk (write_staged touches only the store, s.writes and s.progress), and the image
// reads a ChunkReader makes on its thread (they touch only the reader's own ImageStream).
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "cache/activation_store.h"
#include "cache/codec.h"
#include "cache/manifest.h"
#include "engine/data/dataset.h"
#include "engine/data/image_stream.h"
#include "engine/precompute/build_pipeline.h"
#include "keyers/keyer.h"

namespace recycle {

class Progress;
struct BuildModel;  // the device and the prepared, split model (LibTorch)
class CacheInput;   // another cache's split as the samples (engine/precompute/cache_input.h)

// What the stages share. Fields are filled by the stage named beside them.
struct BuildState {
  explicit BuildState(BuildOptions options);
  ~BuildState();
  BuildState(const BuildState&) = delete;
  BuildState& operator=(const BuildState&) = delete;

  BuildOptions options;
  std::chrono::steady_clock::time_point start;  // construction: run_build's wall time

  // load_inputs
  Codec codec = Codec::kFp16;
  Dataset data;             // without pixels when s.streamed.streamed()
  StreamedImages streamed;  // where data's pixels are
  std::unique_ptr<Keyer> keyer;
  std::unique_ptr<BuildModel> model;
  Manifest manifest;  // the requested one; after reconcile_manifest the stored one if any
  // load_cache_input instead: the samples are another cache's records. s.data then holds the
  // labels and description only.
  std::unique_ptr<CacheInput> cache_input;

  // reconcile_manifest
  std::unique_ptr<ActivationStore> store;
  // Writes that go with the first write of this run: the head's initial weights for a new
  // cache. Declared after `store`, which it refers to.
  std::unique_ptr<ActivationStore::Batch> opening;

  // key_samples (called by plan_split when not called before)
  std::vector<Key> keys;  // keys[i]: sample i's key
  bool keyed = false;
  // compute_chunk: the second pass over streamed images (opened by its first call)
  std::unique_ptr<ImageStream> images;

  // plan_split
  std::vector<IndexEntry> existing;  // the split's index as stored when the run began
  std::vector<int64_t> todo;         // positions whose index entry must be written, ascending
  std::unordered_set<Key, KeyHash> present;  // keys known to have a stored record
  // The store held a record when the run began. When it did not, find_missing knows every
  // key from `present` and asks RocksDB nothing.
  bool had_records = true;
  bool unchanged = false;  // complete, same data, same index: nothing to compute or write

  // the chunk loop
  size_t next = 0;  // todo[next] starts the next chunk
  std::unique_ptr<Progress> progress;
  int64_t writes = 0;  // store writes by this state (0 for an unchanged split)

  BuildReport report;  // counters filled along the way, the rest by build_report
};

// One chunk: up to options.batch consecutive entries of todo.
struct BuildChunk {
  size_t begin = 0, end = 0;         // range of BuildState::todo
  std::vector<int64_t> compute_pos;  // find_missing: a sample position per key to compute
  std::vector<Key> compute_keys;     // find_missing: distinct keys with no stored record
  std::vector<std::string> records;  // compute_chunk: encoded records, one per compute key
  // ChunkReader::read, streamed image splits only: the pixels of todo[begin, end), in that
  // order, item_bytes() each. compute_chunk takes its samples' images from here when set,
  // else from the dataset in memory or a stream of its own.
  std::vector<uint8_t> pixels;
};

// The stages after load_inputs (or load_cache_input) in run_build's order, the chunk loop with
// its ChunkReader and ChunkWriter included: the one chunk loop of a single-process build.
BuildReport run_loaded_build(BuildState& s);

// Checks the options, loads the dataset (streamed), makes the keyer, prepares and splits the model
// and sets s.manifest to the manifest this run asks for (its record shape from a probe forward).
void load_inputs(BuildState& s);
// Deletes the cache first with --rebuild, opens (or creates) it and compares the stored
// manifest with the requested one; refuses another identity, other classes or other record
// shapes with one line. A new cache gets the head's initial weights in s.opening.
void reconcile_manifest(BuildState& s);
// Keys every sample (in parallel; streamed images read a chunk at a time, and the whole file
// checked as load_dataset checks it; a build from another cache takes its index's keys) into
// s.keys and sets report.samples and report.unique. Needs no cache: the ranks of a distributed
// build that do not write it call this alone.
void key_samples(BuildState& s);
// Keys of the samples todo[chunk.begin, chunk.end) into *keys, in that order (the same keys
// key_samples gives them): from chunk.pixels when a ChunkReader read them, else from the
// dataset in memory, else read from a stream of the state's own. For a job that keys as it
// goes, a chunk at a time (recycle-predict); not for a build from another cache.
void key_chunk(BuildState& s, const BuildChunk& chunk, std::vector<Key>* keys);
// Reads the split's stored index, keys every sample (key_samples, unless done already), lists
// the positions to write, decides s.unchanged and notes whether the store holds any record.
void plan_split(BuildState& s);
// The first write of a changed split: its manifest entry (data, counts, incomplete), a
// shorter index cut, and s.opening. Starts the progress bar.
void begin_split(BuildState& s);
// The next chunk of todo into *chunk (cleared); false when none is left.
bool next_chunk(BuildState& s, BuildChunk* chunk);
// What every record of a text cache holds: "hidden" float32 [length, d_model] (the prefix's
// hidden states at the text's valid positions, encoded by `codec`) and "length" int64 [] (a
// scalar, stored exactly). Batches pad the hidden states to their longest and rebuild the mask
// from the lengths (engine/train/text_batches.h).
RecordLayout text_record_layout(int64_t d_model, Codec codec);
// Distinct keys of the chunk that have no stored record (MultiGet for those not known, when
// the store held records before this run).
void find_missing(BuildState& s, BuildChunk* chunk);
// Runs the prefix (no grad) on the samples to compute (a build from another cache: the blocks
// after its split point on its decoded records), checks the output's shape against
// the manifest's record shape, and encodes one record per sample. Text: the texts as the
// keyer hashes them (its normalisation applied), byte tokens padded to the chunk's longest,
// and per sample the text_record_layout tensors of its valid positions.
void compute_chunk(BuildState& s, BuildChunk* chunk);
// A chunk's write batch, made by stage_write and written by write_staged.
struct StagedWrite {
  std::unique_ptr<ActivationStore::Batch> batch;
  int64_t samples = 0;  // index entries in it (the progress bar's step)
};
// The chunk's write batch: its records, its index entries and the manifest's counts. Updates
// s.present, the report's counters and s.manifest's counts as if it were written. Moves the
// records out of the chunk.
StagedWrite stage_write(BuildState& s, BuildChunk* chunk);
// Writes a staged batch after the free-space check; advances the progress bar.
void write_staged(BuildState& s, StagedWrite* w);
// stage_write then write_staged.
void write_chunk(BuildState& s, BuildChunk* chunk);

// Writes staged batches on a thread of its own, one at a time and in order: submit waits for
// the batch before (rethrowing its error) and starts this one. finish waits for the last one.
// The destructor waits too (errors dropped: it runs when the loop has thrown already).
class ChunkWriter {
 public:
  explicit ChunkWriter(BuildState& s) : s_(s) {}
  ~ChunkWriter();
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;
  void submit(StagedWrite w);
  void finish();

 private:
  BuildState& s_;
  StagedWrite current_;
  std::future<void> pending_;
};
// Reads the images of a streamed image split a chunk ahead, on a thread of its own: read(c)
// waits for chunk c's pixels (rethrowing the read's error), moves them into c->pixels and
// starts reading the chunk after c. The chunks must come from next_chunk, in order. A split
// that is not streamed (text, or pixels in memory) is left alone: read does nothing. The
// destructor waits for a read under way (its error dropped).
class ChunkReader {
 public:
  explicit ChunkReader(BuildState& s);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;
  void read(BuildChunk* chunk);

 private:
  void start(size_t begin);  // reads todo[begin, begin + batch) on the thread

  BuildState& s_;
  std::unique_ptr<ImageStream> stream_;
  size_t ahead_begin_ = 0;  // todo position of the chunk being read ahead
  std::future<std::vector<uint8_t>> ahead_;
};

// Marks the split complete (a synced write) and flushes the memtables.
void finish_split(BuildState& s);
// The report: the counters plus records, skipped, seconds and rate (report.prefix_seconds:
// compute_chunk's prefix forwards, summed).
BuildReport build_report(const BuildState& s);

// Throws std::runtime_error (what was written is kept; rerun to resume) when the file system
// of `dir` has less free space than a reserve for RocksDB's flushes plus twice batch_bytes.
void check_free_space(const std::string& dir, uint64_t batch_bytes);

}  // namespace recycle
