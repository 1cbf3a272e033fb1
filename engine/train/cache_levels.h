// Cache levels: the activation caches of one model at several split points, for progressive
// recycling (docs/progressive.md). A levels directory holds one cache per level, each a whole
// cache (recycle-inspect and recycle-train --cache read it as they read any other), in a
// subdirectory named by the level's identity:
//
//   LEVELS/level-<prefix blocks>-<split block>-<16 hex digits of CacheIdentity::digest()>
//
// A level's identity is its manifest's CacheIdentity (model, fingerprint, split point, keyer,
// codec, preprocessing, input shape, record layout). Its fingerprint says which weights made
// it: for a level built from raw data the fingerprint of blocks 0..m (as recycle-build writes
// it); for a level derived from level k, derived_fingerprint(level k's fingerprint,
// fingerprint of blocks k..m-1 as they were when they froze). A rerun whose frozen weights
// are the same finds the same directory complete and reuses it; any other weights give
// another directory. Keys, labels and sample positions of a derived level are those of its
// base level: only the records change. Since the input shape and layout joined the digest,
// levels made before sit in directories of other names: a rerun derives them again.
//
// Deriving a level is a build whose source is another cache: per split of level k, the build's
// stages (engine/precompute/build_stages.h, SplitBuild from CacheBuildInputs in cache_input.h,
// then run) with level k's split as the samples and the newly frozen blocks as the
// prefix. A chunk of `batch` samples at a time is read from level k (CachedBatches: MultiGet
// and decode), pushed through the blocks (eval mode, no grad, batch norms folded as
// recycle-build folds them), encoded and written by the build's ChunkWriter on its own thread
// while the next chunk computes. Memory holds the splits' indexes (24 bytes a sample) and two
// chunks, never a whole split.
//
// Tolerance: a level derived from an fp32 level equals the level recycle-build makes from raw
// data with the same weights within kInferencePrefixTolerance * max(1, max |x|) (both run the
// same folded blocks; only the point where the activation leaves and re-enters memory differs).
// With a lossy codec the base level's rounding is carried into the derived level.
//
// Not thread safe: one thread derives a level at a time, and nothing else writes its directory.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/manifest.h"
#include "engine/data/dataset.h"
#include "engine/models/block_model.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/train/freeze_schedule.h"
#include "recycle/options.h"
#include "recycle/train.h"  // LevelInfo, FreezeEvent

namespace recycle {

// Opens the cache (a level) in `dir` read-only and reads its manifest into *manifest. Throws
// std::runtime_error with one line (no cache there, no manifest, a storage error).
std::unique_ptr<ActivationStore> open_level_read_only(const std::string& dir, Manifest* manifest);

// Blocks [begin, end) of `model` as a model of their own (modules shared, the classifier too),
// for an InferencePrefix over them and for their fingerprint.
BlockModel block_range(const BlockModel& model, int64_t begin, int64_t end);

// The subdirectory of `levels_dir` for the level of identity `id`: named by its prefix blocks,
// split block and the first 16 hex digits of id.digest() (input shape and record layout
// included since this version: levels made before are in directories of other names, so a
// rerun derives them again).
std::string level_dir(const std::string& levels_dir, const CacheIdentity& id);

// The fingerprint of a level derived from a level with fingerprint `base` by blocks whose
// parameters and buffers have fingerprint `blocks` (XXH3-128 hex of both, in order).
std::string derived_fingerprint(const std::string& base, const std::string& blocks);

// The fingerprint of `model` as a level derived along the split points `chain` has it
// ([k0, k1, ..., km], Manifest::derived_blocks): blocks [0, k0) fingerprinted whole, as
// recycle-build fingerprints a prefix, then derived_fingerprint adding blocks [k(i-1), k(i)) for
// each next point. recycle-predict checks a level against the weights it is given with it.
std::string chained_fingerprint(const BlockModel& model, const std::vector<int64_t>& chain);

struct DeriveOptions {
  int64_t batch = 256;          // samples per forward and per write batch
  Compression compression = Compression::kNone;  // as BuildOptions::compression
  bool progress = false;        // a progress bar per split on stderr
  torch::Device device = torch::kCPU;
  // The base's splits to derive (each must be complete there); empty: every complete one. A
  // progressive run derives its training split alone: it evaluates once, at its end, through
  // the frozen blocks (engine/jobs/progressive_job.cc), so no level needs the evaluation split.
  std::vector<std::string> splits;
};

// Derives the level at `to_blocks` from the level in `from_dir`, the splits options.splits
// names (every complete one when it names none), with
// `model`'s blocks [from's prefix_blocks, to_blocks) as they are now (put in eval mode, their
// parameters no longer requiring grad: they are frozen from now on). The head blob is the
// model's head after to_blocks. Each split is a build (SplitBuild from CacheBuildInputs,
// then run: engine/precompute/cache_input.h). A complete level of the same identity is
// reused (level.reused). An incomplete one (a derivation that died) is deleted and derived
// again. Throws
// std::runtime_error with one line for a base that is not a level of this model, a split point
// not deeper than the base's, or a storage error.
LevelInfo derive_level(const std::string& from_dir, BlockModel& model, int64_t to_blocks,
                       const std::string& levels_dir, const DeriveOptions& options);

// The build options of the run (data: the training split as the run reads it; codec,
// compression, batch, threads, progress, device). The model, split point, keyer and cache
// directory are build_level_from_raw's to set.
struct RawLevelOptions : BuildOptions {
  RawLevelOptions() { progress = false; }
};

// The first level of a run that started on raw data: recycle-build's stages (SplitInputs and
// ChunkEncoder, then SplitBuild::run) over the training split (options.data) alone, with
// `model` as it is now split after `to_blocks` (its weights go to a temporary file in levels_dir,
// removed afterwards). The level's directory is named from the identity the encoder asks for. A
// rerun with the same weights finds the level complete (level.reused).
LevelInfo build_level_from_raw(BlockModel& model, int64_t to_blocks, const std::string& levels_dir,
                               const RawLevelOptions& options);

}  // namespace recycle
