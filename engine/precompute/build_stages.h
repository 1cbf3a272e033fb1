// The build of a cache split. Three pieces, each in its own file:
//   SplitInputs   (split_inputs.h)   the split's dataset (images streamed), keyer, views, keys
//   ChunkEncoder  (chunk_encoder.h)  the prefix over a chunk's samples -> its records (LibTorch)
//   SplitBuild    (here)             the coordinator: the split's write (split_transaction.h:
//                                    the one every writer of a cache makes), the plan
//                                    (key_plan.h), the chunk loop
// SplitBuild's methods are the build's named stages, so tests can run them one by one.
// run_build (build_pipeline.h) is SplitBuild(options).run(), and run is these calls in order:
//
//   SplitBuild b(options);  options checked, inputs loaded, model prepared (the constructor)
//   -- b.run(): --
//   open();                 every sample keyed (key_samples, unless done already: bad input
//                           fails before the cache is touched); the cache opened or created,
//                           its identity compared (a mismatch refused); the plan: what the
//                           stored index holds already, what is left to write
//   if (!plan().unchanged()) {
//     begin();              the split marked incomplete (the manifest, a shorter index cut)
//     while (next_chunk(&c)) {  the next chunk of the plan, with the distinct keys that have no
//                               stored record (MultiGet)
//       reader.read(&c);        the chunk's images, read a chunk ahead on the reader's thread
//       encoder().start/finish  the prefix forward (inference form), output shape checked,
//                               encoded; the next chunk's prefix starts before this one's
//                               outputs are encoded
//       write                   one write batch: records, index entries, counts, written on the
//                               writer's thread while the next chunk computes
//     }
//     finish();             the split marked complete, memtables flushed
//   }
//   return report();
//
// write_chunk(&c) makes the same write on the calling thread. The cache is opened, checked,
// begun, staged into and finished by a SplitTransaction (split_transaction.h), as the library's
// CacheWriter's is. A distributed build
// (distributed_build.cc) runs the same stages, with plan_batches, the ranks' encoders on the
// batches and ingest_and_index in place of the chunk loop. Batches reach the store in chunk
// order, so what a crash leaves is what the serial loop leaves. Chunks are written without the
// write-ahead log: a crash loses those since the last memtable flush, a prefix of the chunks
// survives, and the rerun computes the rest. The writer holds at most one batch: memory is two
// chunks' records at most. The reader holds the images of one chunk ahead (gzip inflation is
// serial: read on the chunk loop's thread it left the cores idle for about 5% of a build).
//
// Each stage throws std::runtime_error / std::invalid_argument (StaleCacheError for another
// identity) with one clear line, as run_build does. A build whose chunk loop stopped midway (or
// a killed process) leaves a cache that a new SplitBuild resumes: the plan starts from what the
// stored index holds.
//
// This header needs no LibTorch (ChunkEncoder's is in chunk_encoder.h). Not thread safe: one
// thread runs the stages, except the writes run's writer thread makes (they touch only the
// store, the write count and the progress bar) and the reads of a ChunkReader.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cache/codec.h"
#include "cache/manifest.h"
#include "cache/writable_split.h"
#include "engine/precompute/build_chunk.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/key_plan.h"
#include "engine/precompute/split_transaction.h"

namespace recycle {

class ChunkEncoder;       // the prefix over a chunk's samples (chunk_encoder.h; LibTorch)
class Progress;
class SplitInputs;        // the split's samples and keys (split_inputs.h)
struct Dataset;
struct SampleKeys;        // some samples' keys (split_inputs.h)
struct CacheBuildInputs;  // another cache's split as the samples (cache_input.h)

class SplitBuild {
 public:
  // Checks the options (BuildOptions::validate), loads the split's inputs and prepares the
  // prefix (ChunkEncoder), which works out the manifest this build asks for.
  explicit SplitBuild(BuildOptions options);
  // A build whose samples are another cache's records (a derived level, cache_input.h): checks
  // options.batch, options.cache_dir and the split name; the progress bar reads "derive SPLIT
  // at SPLIT_AT".
  SplitBuild(BuildOptions options, CacheBuildInputs in);
  // The inputs and encoder made by the caller (a cache level names its directory by the
  // identity the encoder works out: cache_levels.cc); `encoder` reads `inputs`.
  SplitBuild(BuildOptions options, std::unique_ptr<SplitInputs> inputs,
             std::unique_ptr<ChunkEncoder> encoder);
  ~SplitBuild();
  SplitBuild(const SplitBuild&) = delete;
  SplitBuild& operator=(const SplitBuild&) = delete;

  // ---- the stages, in run()'s order ----------------------------------------------------------
  // Keys every sample (SplitInputs::key_all) and sets the report's samples and unique counts.
  // Needs no cache: the ranks of a distributed build that do not write it call this alone.
  void key_samples();
  // key_samples with the key pass shared by the ranks of a sharded build: this rank keys only
  // its part of the split (the samples p with p % parts == part; of a folder, only their files
  // are read) and `gather` makes every sample's keys of it and the split's sample count (the
  // other parts from the other ranks: rank_board.h's gathered_keys). Up to 64 samples of the
  // other parts, spread over the split, are keyed here too and must have the keys their ranks
  // sent (std::runtime_error naming the first that differs: ranks given different files).
  void key_samples(int part, int parts,
                   const std::function<SampleKeys(SampleKeys, int64_t)>& gather);
  // key_samples unless done; deletes the cache first with --rebuild, opens (or creates) it and
  // compares the stored manifest with the requested one, refusing another identity, other
  // classes, other record shapes or views with one line (nothing is written, and the cache is
  // closed again); then plans the split against its stored index.
  void open();
  // The first write of a changed split: its manifest entry (data, counts, incomplete), a shorter
  // index cut, and a new cache's head. Starts the progress bar.
  void begin();
  // The next chunk of the plan into *chunk (cleared), with its distinct keys that have no stored
  // record (KeyPlan::find_missing): compute_pos, compute_keys, compute_views; false when none
  // is left.
  bool next_chunk(BuildChunk* chunk);
  // The chunk's records (moved out), its index entries and the manifest's counts in one write
  // (SplitWriter); the report's counters and the progress bar advanced.
  void write_chunk(BuildChunk* chunk);
  // Marks the split complete (a synced write) and flushes the memtables.
  void finish();
  // The counters plus records, skipped, seconds and rate (prefix_seconds: the encoder's).
  BuildReport report() const;
  // open, and when the split changed begin, the chunk loop (with its ChunkReader and a writer
  // thread) and finish: the one chunk loop of a single-process build.
  BuildReport run();

  // ---- a distributed build's rank 0 (distributed_build.cc), after begin ---------------------
  // What a 1-process build would compute, batch by batch: per chunk, the items of its distinct
  // keys with no stored record (KeyPlan::compute_item). The chunk loop is rewound (the index is
  // written from the start by ingest_and_index) and the progress bar dropped (the ranks show
  // their own).
  std::vector<std::vector<int64_t>> plan_batches();
  // Moves the ranks' record files into the cache in one atomic step with the manifest's counts
  // (WritableSplit::ingest_records; `computed` records of `bytes` bytes in all), then writes the
  // split's index entries chunk by chunk. finish comes next.
  void ingest_and_index(const std::vector<std::string>& files, int64_t computed, int64_t bytes);

  // ---- what the distributed build asks of it (distributed_build.cc, rank_board.cc) ---------
  // The records of a chunk whose compute_pos/compute_keys/compute_views are set (any rank's
  // batch): the prefix over its samples (ChunkEncoder::compute).
  void compute(BuildChunk* chunk);
  // The samples' keys (after key_samples), the index as stored and the positions to write
  // (after open).
  const KeyPlan& plan() const { return plan_; }
  // The manifest this build asks for, the split's samples (labels, description), its
  // augmentation and views: what the ranks compare.
  const Manifest& requested() const;
  const Dataset& data() const;
  std::string augment() const;
  int64_t views() const;
  // The opened cache's staging area (after open; std::logic_error before).
  std::string staging_dir();
  // Writes made to the cache so far (after open): begin, chunks, finish.
  int64_t writes();

 private:
  // Its pieces, for tests that run one of them alone (tests/precompute/split_build_access.h).
  friend class SplitBuildTestAccess;
  SplitInputs& inputs() { return *inputs_; }
  ChunkEncoder& encoder() { return *encoder_; }
  // The opened cache: its manifest (the stored one, with this run's counts as chunks are
  // staged), its writer, its staging area. std::logic_error before open.
  WritableSplit& split();

  // The samples' keys as key_samples found them: the report's counts and the plan's keys.
  void use_keys(std::vector<Key> keys);
  // BuildOptions::validate, the split's name; the thread count set.
  void check_options();
  // A sharded build's rank (options.shard.sharded()): keeps the samples of its shard, before
  // the split is planned.
  void keep_shard();
  // The shard this build writes (SplitInfo::shard): none unless options.shard.sharded().
  SplitShard shard() const;
  // The build's own checks of a stored manifest (the transaction makes the common ones): a
  // missing --weights before the identity; the class names adopted and the record shapes after.
  StoredChecks stored_checks();
  // The chunk's write batch (records, index entries, the manifest's counts): the report's
  // counters advanced as if it were written.
  StagedWrite stage_write(BuildChunk* chunk);
  size_t chunk_size() const;

  BuildOptions options_;
  std::chrono::steady_clock::time_point start_;  // construction: run_build's wall time
  std::unique_ptr<SplitInputs> inputs_;
  std::unique_ptr<ChunkEncoder> encoder_;  // reads *inputs_: declared after it
  std::unique_ptr<SplitTransaction> write_;  // open
  KeyPlan plan_;
  std::unique_ptr<Progress> progress_;  // begin
  std::string progress_label_;
  BuildReport report_;  // counters filled along the way, the rest by report()
  BuildStageSeconds stages_;   // run()'s stages
  int64_t split_samples_ = 0;  // the whole split's samples (a sharded build keeps fewer)
};

// Writes staged batches (SplitWriter::write) on a thread of its own, one at a time and in order,
// advancing `progress` (may be null) by each one's index entries: submit waits for the batch
// before (rethrowing its error) and starts this one. finish waits for the last one. The
// destructor waits too (errors dropped: it runs when the loop has thrown already).
class ChunkWriter {
 public:
  ChunkWriter(SplitWriter& writer, Progress* progress) : writer_(writer), progress_(progress) {}
  ~ChunkWriter();
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;
  void submit(StagedWrite w);
  void finish();
  double write_seconds() const { return write_seconds_; }  // on its thread, the writes finished

 private:
  SplitWriter& writer_;
  Progress* progress_;
  StagedWrite current_;
  std::future<void> pending_;
  double write_seconds_ = 0;
};

// What every record of a text cache holds: "hidden" float32 [length, d_model] (the prefix's
// hidden states at the text's valid positions, encoded by `codec`) and "length" int64 [] (a
// scalar, stored exactly). Batches pad the hidden states to their longest and rebuild the mask
// from the lengths (engine/train/text_batches.h).
RecordLayout text_record_layout(int64_t d_model, Codec codec);

// What every record of a cache built from token ids holds, as recycle.build makes it from
// recycle.hf.split's prefix: "hidden" float32 [length, hidden] (encoded by `codec`) and "mask"
// int64 [length] (1s: the valid positions). recycle.CachedLoader pads both per batch.
RecordLayout token_record_layout(int64_t hidden, Codec codec);

}  // namespace recycle
