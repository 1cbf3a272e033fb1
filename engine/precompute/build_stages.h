// The build of a cache split: a SplitBuild owns everything the build holds (options, dataset,
// keyer, model, store, plan, counters) and its methods are the build's named stages, so tests
// can run them one by one. run_build (build_pipeline.h) is load_inputs then run, and run is
// these calls in this order:
//
//   SplitBuild b(options);
//   b.load_inputs();        options checked, dataset (images streamed), keyer, model prepared
//                           (a build from another cache: load_cache_input, cache_input.h)
//   -- b.run(): --
//   key_samples();          first pass over the images: every sample keyed, chunk by chunk
//   reconcile_manifest();   cache opened or created; its identity compared, a mismatch refused
//   plan_split();           keys, what the stored index holds already, what is left to write
//   if (!unchanged()) {
//     begin_split();        the split marked incomplete (the manifest, a shorter index cut)
//     BuildChunk c;
//     ChunkReader reader(*this);
//     ChunkWriter writer(*this);
//     while (next_chunk(&c)) {
//       find_missing(&c);      distinct keys of the chunk with no stored record (MultiGet)
//       reader.read(&c);       the chunk's images, read on the reader's thread while the chunk
//                              before computed; it starts reading the next chunk's
//       compute_chunk(&c);     prefix forward (inference form), output shape checked, encoded
//       writer.submit(stage_write(&c));  one write batch: records, index entries, counts,
//                              written on the writer's thread while the next chunk computes
//     }
//     writer.finish();      the last batch written (rethrows a write's error)
//     finish_split();       the split marked complete, memtables flushed
//   }
//   return report();
//
// write_chunk(&c) is stage_write then write_staged on the calling thread: the same writes.
// The writes themselves (begin_split, stage_write's batch, write_staged, finish_split) are a
// SplitWriter's (cache/split_writer.h), as every writer's of a cache are.
// A distributed build (distributed_build.cc) runs the same stages, with plan_batches,
// compute_chunk on the batches it is given and ingest_and_index in place of the chunk loop.
// Batches reach the store in chunk order, so what a crash leaves is what the serial loop
// leaves. Chunks are written without the write-ahead log (ActivationStore::write_unlogged): a
// crash loses those since the last memtable flush, a prefix of the chunks survives, and the
// rerun computes the rest. The writer holds at most one batch: memory is two chunks' records
// at most. The reader holds the images of one chunk ahead (gzip inflation is serial: read on the
// chunk loop's thread it left the cores idle for about 5% of a build).
//
// Each stage throws std::runtime_error / std::invalid_argument with one clear line, as
// run_build does. A state whose chunk loop stopped midway (or a killed process) leaves a
// cache that a new SplitBuild resumes: plan_split starts from what the stored index holds.
//
// The images are streamed (engine/data/image_stream.h): load_inputs reads the labels and the
// images' header, key_samples reads the images once, a chunk at a time, to key every sample
// (16 bytes each: the split's unique count goes into the manifest's first write and a rerun
// must compare every key with the index before deciding to write nothing), and compute_chunk
// reads them a second time, forward, for the samples it computes. Memory holds the keys,
// labels and ids, never the split's images. key_samples runs before the cache is opened, so
// bad input fails before the cache is touched. A build given its split in memory
// (use_samples_in_memory) reads the pixels there.
//
// No LibTorch here: the prefix runs in a PrefixRunner (engine/precompute/prefix_runner.h: the
// device, the prepared model, the folded prefix the records come from).
// Not thread safe: one thread runs the stages of a SplitBuild, except write_staged, which a
// ChunkWriter runs on its thread while that one thread runs find_missing and compute_chunk of
// the next chunk (write_staged touches only the store, the write count and the progress bar), and
// the image reads a ChunkReader makes on its thread (they touch only the reader's own ImageStream).
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/codec.h"
#include "cache/manifest.h"
#include "cache/split_writer.h"
#include "engine/data/augment.h"
#include "engine/data/dataset.h"
#include "engine/data/image_stream.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/key_plan.h"
#include "recycle/keyer.h"

namespace at {
class Tensor;  // torch::Tensor; the members that take one are defined where LibTorch is
}  // namespace at

namespace recycle {

class Progress;
class PrefixRunner;       // the prefix on its device (LibTorch; prefix_runner.h)
class CacheInput;         // another cache's split as the samples (engine/precompute/cache_input.h)
struct CacheBuildInputs;  // what load_cache_input takes (cache_input.h)

// One chunk: up to options.batch consecutive entries of the plan's todo() positions.
struct BuildChunk {
  size_t begin = 0, end = 0;         // range of SplitBuild::todo()
  std::vector<int64_t> compute_pos;  // find_missing: a sample position per key to compute
  std::vector<Key> compute_keys;     // find_missing: distinct keys with no stored record
  // find_missing, a split with views: the view of each compute key (whose key is then the
  // view's, keyers/view_key.h, and compute_pos may repeat a position once per view)
  std::vector<int64_t> compute_views;
  // start_chunk: the prefix runs on it (finish_chunk takes its outputs), and a text chunk's
  // token length (its longest text's).
  bool started = false;
  int64_t input_length = 0;
  std::vector<std::string> records;  // compute_chunk: encoded records, one per compute key
  // ChunkReader::read, streamed image splits only: the pixels of todo[begin, end), in that
  // order, item_bytes() each. compute_chunk takes its samples' images from here when set,
  // else from the dataset in memory or a stream of its own.
  std::vector<uint8_t> pixels;
};

// The build of one split into one cache: the owner of its state. Each stage throws
// std::runtime_error / std::invalid_argument (StaleCacheError for another identity) with one
// line, as run_build does; a build whose stages stopped midway leaves a cache that a new
// SplitBuild resumes. Dropping it closes the store (releasing the cache's writer lock).
class SplitBuild {
 public:
  explicit SplitBuild(BuildOptions options);
  ~SplitBuild();
  SplitBuild(const SplitBuild&) = delete;
  SplitBuild& operator=(const SplitBuild&) = delete;

  // ---- the stages, in run()'s order ----------------------------------------------------------
  // Checks the options, loads the dataset (streamed), makes the keyer, prepares and splits the
  // model and sets the manifest this run asks for (its record shape from a probe forward).
  void load_inputs();
  // load_inputs for a build whose samples are another cache's records (cache_input.h).
  void load_cache_input(CacheBuildInputs in);
  // The cache directory, changed after load_inputs and before reconcile_manifest: a cache
  // level's directory is named by the identity load_inputs works out (cache_levels.cc).
  void set_cache_dir(const std::string& dir);
  // Keys every sample (in parallel; streamed images read a chunk at a time, and the whole file
  // checked as load_dataset checks it; a build from another cache takes its index's keys) and
  // sets the report's samples and unique counts. Needs no cache: the ranks of a distributed
  // build that do not write it call this alone.
  void key_samples();
  // Deletes the cache first with --rebuild, opens (or creates) it and compares the stored
  // manifest with the requested one; refuses another identity, other classes or other record
  // shapes with one line. A new cache gets the head's initial weights with the first write.
  void reconcile_manifest();
  // Reads the split's stored index, keys every sample (key_samples, unless done already), lists
  // the positions to write, decides unchanged() and notes whether the store holds any record.
  void plan_split();
  // The first write of a changed split: its manifest entry (data, counts, incomplete), a
  // shorter index cut, and the opening writes (a new cache's head). Starts the progress bar.
  void begin_split();
  // The next chunk of todo() into *chunk (cleared); false when none is left.
  bool next_chunk(BuildChunk* chunk);
  // Distinct keys of the chunk that have no stored record (MultiGet for those not known, when
  // the store held records before this run). A split with views: the distinct view keys of
  // the chunk's samples with no stored record, with their positions and views.
  void find_missing(BuildChunk* chunk);
  // Runs the prefix (no grad) on chunk->compute_pos (a build from another cache: the blocks
  // after its split point on its decoded records), checks the output's shape against the
  // manifest's record shape, and encodes one record per sample into chunk->records: the three
  // steps below. Text: the texts as the keyer hashes them (its normalisation applied), byte
  // tokens padded to the chunk's longest, and per sample the text_record_layout tensors of its
  // valid positions. start_chunk then finish_chunk.
  void compute_chunk(BuildChunk* chunk);
  // compute_chunk in two halves, so that run() starts the next chunk's prefix before this one's
  // outputs are encoded (on a GPU the device computes it meanwhile: PrefixRunner::start):
  // start_chunk clears the records, makes the inputs and starts the prefix on them (nothing
  // for a chunk with nothing to compute), and counts the chunk's keys as present (the chunks
  // after it compute none of them again); finish_chunk takes the outputs, checks their shape
  // and encodes the records. Chunks finish in the order they started.
  void start_chunk(BuildChunk* chunk);
  void finish_chunk(BuildChunk* chunk);
  // The chunk's write batch: its records, its index entries and the manifest's counts. Counts
  // the records as present and updates the report's counters and the manifest's counts as if it
  // were written. Moves the records out of the chunk.
  StagedWrite stage_write(BuildChunk* chunk);
  // Writes a staged batch (SplitWriter::write); advances the progress bar.
  void write_staged(StagedWrite* w);
  // stage_write then write_staged.
  void write_chunk(BuildChunk* chunk);
  // Marks the split complete (a synced write) and flushes the memtables.
  void finish_split();
  // The report: the counters plus records, skipped, seconds and rate (prefix_seconds:
  // compute_chunk's prefix forwards, summed).
  BuildReport report() const;

  // The stages after load_inputs (or load_cache_input) in the order above, the chunk loop with
  // its ChunkReader and ChunkWriter included: the one chunk loop of a single-process build.
  BuildReport run();

  // ---- a distributed build's rank 0 (distributed_build.cc), after begin_split ---------------
  // What a 1-process build would compute, batch by batch: per chunk of todo(), the items of
  // its distinct keys that have no stored record (compute_item: a position, or with views a
  // position and a view). The chunk loop is rewound (the index is
  // written from the start by ingest_and_index) and the progress bar dropped (the ranks show
  // their own).
  std::vector<std::vector<int64_t>> plan_batches();
  // Moves the ranks' record files into the cache in one atomic step with the manifest's counts
  // (ActivationStore::ingest_records; `computed` records of `bytes` bytes in all), then writes
  // the split's index entries chunk by chunk. finish_split comes next.
  void ingest_and_index(const std::vector<std::string>& files, int64_t computed, int64_t bytes);
  // A rank's chunk from plan_batches' items: compute_pos, compute_views and compute_keys set as
  // find_missing sets them.
  void set_compute_items(const std::vector<int64_t>& items, BuildChunk* chunk) const;
  // The opened cache's staging directory (after reconcile_manifest).
  std::string staging_dir() const;

  // ---- a job that keys and computes as it goes (recycle-predict: engine/jobs/predict_job.cc) --
  // After load_inputs, instead of a cache's plan: todo() is every sample, in order.
  void plan_every_sample();
  // Keys of the samples todo[chunk.begin, chunk.end) into *keys, in that order (the keys
  // key_samples gives them): from chunk.pixels when a ChunkReader read them, else from the
  // dataset in memory, else read from a stream of the build's own. Not for a build from
  // another cache.
  void key_chunk(const BuildChunk& chunk, std::vector<Key>* keys);
  // compute_chunk step by step (the caller includes <torch/torch.h>): chunk->compute_pos as
  // the prefix's input (float32 [m, C, H, W] on the model's device; a build from another cache:
  // its decoded records; text: byte tokens int64 [m, L] of the texts as the keyer hashes them,
  // L the chunk's longest); the prefix on it (no grad; float32, contiguous, on the CPU: images
  // [m, ...record shape] from the folded prefix, text the packed features [m, L, D + 1] of
  // engine/models/transformer.h; its time added to the report's prefix_seconds;
  // std::runtime_error for another shape); and one record per row of such outputs, encoded by
  // the codec, into chunk->records (text: text_record_layout's, the valid positions only;
  // CodecRangeError naming the sample for a value the codec cannot hold).
  at::Tensor chunk_inputs(BuildChunk* chunk);
  at::Tensor chunk_prefix_outputs(const at::Tensor& inputs);
  // The prefix's outputs of m inputs (text: of `length` tokens) checked as chunk_prefix_outputs
  // checks them, the prefix's time added to the report.
  at::Tensor checked_outputs(const at::Tensor& out, int64_t m, int64_t length);
  void encode_chunk_outputs(const at::Tensor& outputs, BuildChunk* chunk);
  // The prefix on its device, with the prepared, split model (engine/precompute/
  // prefix_runner.h), after load_inputs.
  PrefixRunner& prefix() { return *prefix_; }

  // ---- what the build knows so far (read only) -----------------------------------------------
  const BuildOptions& options() const { return options_; }
  const Dataset& data() const { return data_; }  // without pixels when streamed
  const StreamedImages& streamed() const { return streamed_; }
  const Keyer& keyer() const { return *keyer_; }  // after load_inputs
  // The requested manifest; after reconcile_manifest the stored one if any, with this run's
  // counts as the chunks are staged.
  const Manifest& manifest() const { return manifest_; }
  // Which samples are written and which records computed (key_plan.h): the samples' keys,
  // the index as stored, the positions to write.
  const KeyPlan& plan() const { return plan_; }
  const std::vector<Key>& keys() const { return plan_.keys(); }  // keys()[i]: sample i's key
  const std::vector<IndexEntry>& existing() const { return plan_.existing(); }  // as stored
  const std::vector<int64_t>& todo() const { return plan_.todo(); }  // to write, ascending
  // Augmented views per sample (BuildOptions::views; 0: none) and their augmentation.
  int64_t views() const { return views_; }
  const Augment& augment() const { return augment_; }
  // Samples per chunk: options().batch, divided by the views (at least 1), so that a chunk's
  // prefix forward holds about options().batch images either way.
  size_t chunk_size() const;
  size_t next() const { return plan_.next(); }  // todo()[next()] starts the next chunk
  // plan_split: the split is complete, same data, same index: nothing to compute or write.
  bool unchanged() const { return plan_.unchanged(); }
  // plan_split: the store held a record when the run began. When it did not, find_missing
  // knows every key from what this run wrote and asks RocksDB nothing.
  bool had_records() const { return plan_.had_records(); }
  // Store writes by this build (0 when unchanged).
  int64_t writes() const { return writer_ ? writer_->writes() : 0; }
  const BuildReport& counters() const { return report_; }  // the report's counters so far

  // The split's samples with their pixels in memory (the same samples load_inputs loaded,
  // loaded whole): compute_chunk reads them there instead of streaming the file again.
  void use_samples_in_memory(Dataset whole);

 private:
  friend class ChunkWriter;
  friend class ChunkReader;
  friend class SplitBuildTestAccess;  // tests that corrupt the state on purpose

  // The samples `positions` (ascending; each in [chunk.begin, chunk.end) of todo) of a chunk
  // whose pixels a ChunkReader read, as read_samples gives them.
  Dataset chunk_samples(const BuildChunk& chunk, const std::vector<int64_t>& positions) const;
  // A split with views: chunk.compute_pos's images, each augmented as its view (the seed from
  // its view key), in compute order.
  Dataset view_samples(const BuildChunk& chunk);

  BuildOptions options_;
  std::chrono::steady_clock::time_point start_;  // construction: run_build's wall time

  // load_inputs
  Codec codec_ = Codec::kFp16;
  Augment augment_;  // BuildOptions::augment, parsed (views_ > 0)
  int64_t views_ = 0;
  Dataset data_;             // without pixels when streamed_.streamed()
  StreamedImages streamed_;  // where data_'s pixels are
  std::unique_ptr<Keyer> keyer_;
  std::unique_ptr<PrefixRunner> prefix_;
  Manifest manifest_;
  // load_cache_input instead: the samples are another cache's records. data_ then holds the
  // labels and description only.
  std::unique_ptr<CacheInput> cache_input_;

  // reconcile_manifest
  std::unique_ptr<ActivationStore> store_;
  // Writes that go with the first write of this run: the head's initial weights for a new
  // cache. Declared after store_, which it refers to.
  std::unique_ptr<ActivationStore::Batch> opening_;
  std::unique_ptr<SplitWriter> writer_;  // the split's writes, on store_ and manifest_

  // key_samples (called by plan_split when not called before) sets its keys, plan_split or
  // plan_every_sample its plan; the chunk loop reads it.
  KeyPlan plan_;
  // compute_chunk: the second pass over streamed images (opened by its first call)
  std::unique_ptr<ImageStream> images_;

  // the chunk loop
  std::unique_ptr<Progress> progress_;
  int share_chunks_ = 0;             // chunks measure_prefix_share measured

  // The head (the rest of the model) timed on up to 64 of a chunk's prefix outputs, against
  // the prefix's time for the chunk: report_.prefix_share. Done for the first two chunks
  // computed (the second's figure stays: the first pays one-time costs).
  void measure_prefix_share(const at::Tensor& outputs);

  BuildReport report_;  // counters filled along the way, the rest by report()
};

// What every record of a text cache holds: "hidden" float32 [length, d_model] (the prefix's
// hidden states at the text's valid positions, encoded by `codec`) and "length" int64 [] (a
// scalar, stored exactly). Batches pad the hidden states to their longest and rebuild the mask
// from the lengths (engine/train/text_batches.h).
RecordLayout text_record_layout(int64_t d_model, Codec codec);

// Writes staged batches on a thread of its own, one at a time and in order: submit waits for
// the batch before (rethrowing its error) and starts this one. finish waits for the last one.
// The destructor waits too (errors dropped: it runs when the loop has thrown already).
class ChunkWriter {
 public:
  explicit ChunkWriter(SplitBuild& b) : b_(b) {}
  ~ChunkWriter();
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;
  void submit(StagedWrite w);
  void finish();

 private:
  SplitBuild& b_;
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
  explicit ChunkReader(SplitBuild& b);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;
  void read(BuildChunk* chunk);

 private:
  void start(size_t begin);  // reads todo[begin, begin + batch) on the thread

  SplitBuild& b_;
  std::unique_ptr<ImageStream> stream_;
  size_t ahead_begin_ = 0;  // todo position of the chunk being read ahead
  std::future<std::vector<uint8_t>> ahead_;
};

}  // namespace recycle
