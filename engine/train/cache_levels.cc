#include "engine/train/cache_levels.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "base/seconds.h"
#include "cache/activation_store.h"
#include "cache/open_existing.h"
#include "engine/models/encoder_spec.h"
#include "engine/models/fingerprint.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/model_setup.h"
#include "engine/models/split_model.h"
#include "engine/models/weights_io.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/build_stages.h"
#include "engine/precompute/cache_input.h"
#include "engine/precompute/chunk_encoder.h"
#include "engine/precompute/split_inputs.h"
#include "engine/train/batch_sources.h"
#include "engine/util/atomic_file.h"
#include "recycle/content_hasher.h"
#include "recycle/keyer.h"

namespace recycle {

namespace {

// The fingerprint of blocks [begin, end) of `model` alone (the classifier left out).
std::string range_fingerprint(const BlockModel& model, int64_t begin, int64_t end) {
  const BlockModel added = block_range(model, begin, end);
  BlockStack stack;  // the blocks alone (as_stack would bring the classifier)
  for (int64_t i = 0; i < added.num_blocks(); ++i)
    stack->append(added.block_names[i], added.blocks[i]);
  return module_fingerprint(*stack);
}

// Freezes blocks [0, blocks): eval mode, no grad (what split_block_model does to a prefix).
SplitModel freeze_prefix(BlockModel& model, int64_t blocks) {
  return split_block_model(model, blocks);
}

// True when `dir` holds a complete level with the identity of `want` (every split of it
// complete). Throws when it holds a cache of another identity.
bool complete_level(const std::string& dir, const CacheIdentity& want) {
  if (!std::filesystem::exists(dir)) return false;
  StoreOptions so;
  so.read_only = true;
  std::unique_ptr<ActivationStore> store;
  if (!ActivationStore::open(dir, so, &store).ok()) return false;
  Manifest have;
  if (!store->read_manifest(&have).ok()) return false;
  const auto diffs = have.identity().identity_differences(want);
  if (!diffs.empty()) {
    throw std::runtime_error(mismatch_message(dir, diffs, "remove this level directory"));
  }
  if (have.splits.empty()) return false;
  for (const auto& [name, info] : have.splits) {
    if (!info.complete) return false;
  }
  return true;
}

// True when `name` is one of `splits`, or `splits` is empty (every split).
bool wanted(const std::vector<std::string>& splits, const std::string& name) {
  return splits.empty() || std::find(splits.begin(), splits.end(), name) != splits.end();
}

int64_t total_samples(const std::string& dir) {
  Manifest m;
  open_level_read_only(dir, &m);
  int64_t n = 0;
  for (const auto& [name, info] : m.splits) n += info.samples;
  return n;
}

// A split of a level as the input of a build (load_cache_input): its index, and its records
// decoded by CachedBatches (MultiGet, decode) on the build's device.
class LevelSplitInput final : public CacheInput {
 public:
  LevelSplitInput(const ActivationStore& store, const Manifest& m, const std::string& split,
                  const torch::Device& device)
      : batches_(store, m, split, device) {  // reads the index, checks it
    if (m.splits.at(split).views > 0) {
      throw std::invalid_argument("split '" + split + "' of cache " + store.dir() + " holds " +
                                  std::to_string(m.splits.at(split).views) +
                                  " augmented views per sample: progressive levels are derived "
                                  "from a split without views");
    }
    store.read_split_index(split, m.splits.at(split), &index_).throw_if_error();
  }
  const std::vector<IndexEntry>& index() const override { return index_; }
  torch::Tensor read(const int64_t* positions, int64_t n) override {
    batches_.load(positions, n, &batch_);
    return batch_.features();
  }

 private:
  CachedBatches batches_;
  std::vector<IndexEntry> index_;
  Batch batch_;
};

}  // namespace

BlockModel block_range(const BlockModel& model, int64_t begin, int64_t end) {
  BlockModel part;
  part.spec = model.spec;
  for (int64_t i = begin; i < end; ++i) {
    part.block_names.push_back(model.block_names[i]);
    part.blocks.push_back(model.blocks[i]);
  }
  part.classifier = model.classifier;
  return part;
}

std::unique_ptr<ActivationStore> open_level_read_only(const std::string& dir, Manifest* manifest) {
  return open_cache_for_read(dir, manifest);
}

std::string level_dir(const std::string& levels_dir, const CacheIdentity& id) {
  return (std::filesystem::path(levels_dir) / ("level-" + std::to_string(id.prefix_blocks) + "-" +
                                               id.split_at + "-" + id.digest().substr(0, 16)))
      .string();
}

std::string chained_fingerprint(const BlockModel& model, const std::vector<int64_t>& chain) {
  if (chain.empty() || chain.front() < 1 || chain.back() > model.num_blocks()) {
    throw std::invalid_argument("chained_fingerprint: split points outside the model's blocks");
  }
  std::string fingerprint = module_fingerprint(*split_block_model(model, chain.front()).prefix);
  for (size_t i = 1; i < chain.size(); ++i) {
    fingerprint =
        derived_fingerprint(fingerprint, range_fingerprint(model, chain[i - 1], chain[i]));
  }
  return fingerprint;
}

std::string derived_fingerprint(const std::string& base, const std::string& blocks) {
  ContentHasher hasher;
  hasher.update_field("derived");
  hasher.update_field(base);
  hasher.update_field(blocks);
  return hasher.digest().to_hex();
}

namespace {

// The manifest of a level derived from `from` (at `from_dir`, k blocks) at to_blocks: the base's
// with the new split point, fingerprint and record shape (a probe through `blocks`), and what it
// was made from instead of the base's weights file (whose prefix is not the level's); no splits,
// no counts.
Manifest derived_manifest(const Manifest& from, const std::string& from_dir, BlockModel& model,
                          int64_t k, int64_t to_blocks, const std::string& split_at,
                          const InferencePrefix& blocks, const torch::Device& device) {
  Manifest want = from;
  want.fingerprint = derived_fingerprint(from.fingerprint, range_fingerprint(model, k, to_blocks));
  want.split_at = split_at;
  want.prefix_blocks = to_blocks;
  want.weights_file.clear();
  want.derived_from = from_dir;
  if (want.derived_blocks.empty()) want.derived_blocks = {k};
  want.derived_blocks.push_back(to_blocks);
  const RecordLayout base_layout = from.layout();
  std::vector<int64_t> probe_shape = {1};
  probe_shape.insert(probe_shape.end(), base_layout.at(0).shape.begin(),
                     base_layout.at(0).shape.end());
  const torch::Tensor probe = blocks.forward(torch::zeros(probe_shape, device));
  want.record_shapes = {probe.sizes().slice(1).vec()};
  want.record_layout = RecordLayout();
  want.classifier = kClassifierPretrained;  // the head blob holds the classifier as it is now
  want.splits.clear();
  want.records = 0;
  want.record_bytes = 0;
  return want;
}

}  // namespace

LevelInfo derive_level(const std::string& from_dir, BlockModel& model, int64_t to_blocks,
                       const std::string& levels_dir, const DeriveOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.batch < 1) throw std::invalid_argument("derive_level: batch must be at least 1");
  Manifest from_m;
  const std::unique_ptr<ActivationStore> from = open_level_read_only(from_dir, &from_m);
  if (from_m.model != model.spec || from_m.total_blocks != model.num_blocks()) {
    throw std::runtime_error("level " + from_dir + " is a cache of " + from_m.model +
                             ", not of the model being trained (" + model.spec + ")");
  }
  const int64_t k = from_m.prefix_blocks;
  if (!(to_blocks > k && to_blocks <= model.num_blocks())) {
    throw std::runtime_error("cannot derive a level at " + std::to_string(to_blocks) +
                             " blocks from " + from_dir + ", which is at " + std::to_string(k));
  }
  for (const std::string& name : o.splits) {
    const auto it = from_m.splits.find(name);
    if (it == from_m.splits.end() || !it->second.complete) {
      throw std::runtime_error("level " + from_dir + " has no complete split '" + name +
                               "' to derive a level from");
    }
  }
  const SplitModel split = freeze_prefix(model, to_blocks);
  const BlockModel added = block_range(model, k, to_blocks);
  const InferencePrefix blocks(added, to_blocks - k);

  const Manifest want = derived_manifest(from_m, from_dir, model, k, to_blocks, split.split_at,
                                         blocks, o.device);
  LevelInfo level;
  level.dir = level_dir(levels_dir, want);
  level.prefix_blocks = to_blocks;
  level.split_at = want.split_at;
  level.fingerprint = want.fingerprint;
  level.source = from_dir;
  if (complete_level(level.dir, want)) {
    level.reused = true;
    level.samples = total_samples(level.dir);
    level.seconds = seconds_since(start);
    return level;
  }
  std::filesystem::create_directories(levels_dir);
  if (std::filesystem::exists(level.dir)) ActivationStore::destroy(level.dir).throw_if_error();

  // One build per split, through the build's stages.
  const std::string head = module_to_bytes(*split.head);
  torch::NoGradGuard no_grad;
  for (const auto& [name, info] : from_m.splits) {
    if (!info.complete || !wanted(o.splits, name)) continue;
    BuildOptions bo;
    bo.cache_dir = level.dir;
    bo.compression = o.compression;
    bo.batch = o.batch;
    bo.progress = o.progress;
    bo.device = o.device.str();
    bo.data.split = name;
    CacheBuildInputs in;
    in.input = std::make_unique<LevelSplitInput>(*from, from_m, name, o.device);
    in.data = info.data;
    in.classes = info.classes;
    in.blocks = &added;
    in.head = head;
    in.manifest = want;
    SplitBuild b(bo, std::move(in));
    const BuildReport r = b.run();
    level.computed += r.computed;
    level.samples += r.samples;
    level.bytes += r.bytes;
  }
  if (level.samples == 0) {
    throw std::runtime_error("level " + from_dir + " has no complete split to derive from");
  }
  level.seconds = seconds_since(start);
  return level;
}

LevelInfo build_level_from_raw(BlockModel& model, int64_t to_blocks, const std::string& levels_dir,
                               const RawLevelOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const SplitModel split = freeze_prefix(model, to_blocks);
  LevelInfo level;
  level.prefix_blocks = to_blocks;
  level.split_at = split.split_at;
  level.source = "raw";
  std::filesystem::create_directories(levels_dir);
  // The weights go to LEVELS/.weights-PID.pt, removed afterwards, on failure and on
  // SIGTERM/SIGINT (TemporaryFile); those of runs killed outright are removed here.
  remove_orphaned_temporaries(levels_dir, ".weights-", ".pt");
  const TemporaryFile weights_file(
      (std::filesystem::path(levels_dir) / (".weights-" + std::to_string(::getpid()) + ".pt"))
          .string());
  const std::string& weights = weights_file.path();
  save_block_model(model, weights);

  // The run's options (data, codec, compression, batch, threads, progress, device) with the
  // model as it is now, split after to_blocks.
  BuildOptions bo = o;  // the BuildOptions part
  bo.model.weights = weights;
  // The encoder as --model names it beside --weights: its name, and for a model loaded from a
  // file that file and its digest (the options come from the weights).
  {
    EncoderSpec named = EncoderSpec::parse(model.spec);
    named.options.clear();
    bo.model.encoder = named.to_string();
  }
  bo.recycle = kNoRecycle;
  bo.split_at = split.split_at;
  bo.keyer = default_keyer_spec(/*text_data=*/false);
  bo.rebuild = false;
  // The level's directory is named by the identity the encoder asks for (input shape and
  // record layout included), so it is known only once the split is loaded.
  auto inputs = std::make_unique<SplitInputs>(with_encoder_input(bo.data, bo.model), bo.keyer,
                                              bo.augment, bo.views);
  auto encoder = std::make_unique<ChunkEncoder>(*inputs, bo);
  level.dir = level_dir(levels_dir, encoder->requested().identity());
  level.fingerprint = encoder->requested().fingerprint;
  bo.cache_dir = level.dir;
  SplitBuild b(bo, std::move(inputs), std::move(encoder));
  const BuildReport r = b.run();
  level.reused = r.computed == 0 && r.index_written == 0;
  level.computed = r.computed;
  level.samples = r.samples;
  level.bytes = r.bytes;
  level.seconds = seconds_since(start);
  return level;
}

}  // namespace recycle
