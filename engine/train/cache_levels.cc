#include "engine/train/cache_levels.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <unordered_set>

#include "cache/activation_store.h"
#include "cache/codec.h"
#include "cache/record.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/build_stages.h"
#include "engine/precompute/prefix_identity.h"
#include "engine/models/fingerprint.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/preprocess.h"
#include "engine/models/split_model.h"
#include "engine/models/weights_io.h"
#include "engine/train/batch_sources.h"
#include "engine/util/parallel_loop.h"
#include "engine/util/progress.h"
#include "keyers/content_hasher.h"
#include "keyers/keyer_registry.h"

namespace recycle {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Blocks [begin, end) of `model` as a model of their own (modules shared), for an
// InferencePrefix over them and for their fingerprint.
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

// Freezes blocks [0, blocks): eval mode, no grad (what split_block_model does to a prefix).
SplitModel freeze_prefix(BlockModel& model, int64_t blocks) {
  return split_block_model(model, blocks);
}

// True when `dir` holds a complete level with the identity of `want` (every split of it
// complete). Throws when it holds a cache of another identity.
bool complete_level(const std::string& dir, const Manifest& want) {
  if (!std::filesystem::exists(dir)) return false;
  StoreOptions so;
  so.read_only = true;
  std::unique_ptr<ActivationStore> store;
  if (!ActivationStore::open(dir, so, &store).ok()) return false;
  Manifest have;
  if (!store->read_manifest(&have).ok()) return false;
  const auto diffs = have.identity_differences(want);
  if (!diffs.empty()) {
    throw std::runtime_error(mismatch_message(dir, diffs, "remove this level directory"));
  }
  if (have.splits.empty()) return false;
  for (const auto& [name, info] : have.splits) {
    if (!info.complete) return false;
  }
  return true;
}

int64_t total_samples(const std::string& dir) {
  Manifest m;
  open_level_read_only(dir, &m);
  int64_t n = 0;
  for (const auto& [name, info] : m.splits) n += info.samples;
  return n;
}

// Derives one split of `from` into the level s.store writes (s.manifest its manifest).
void derive_split(BuildState& s, const ActivationStore& from, const Manifest& from_m,
                  const std::string& split, const InferencePrefix& blocks, Codec codec,
                  const DeriveOptions& o, LevelInfo* level) {
  s.options.data.split = split;
  const SplitInfo& base = from_m.splits.at(split);
  CachedBatches source(from, from_m, split, o.device);  // reads the index, checks it
  std::vector<IndexEntry> index;
  from.read_split_index(split, base, &index).throw_if_error();
  const int64_t n = static_cast<int64_t>(index.size());

  SplitInfo& info = s.manifest.splits[split];
  info = base;
  info.complete = false;
  {
    ActivationStore::Batch first(*s.store);
    first.put_manifest(s.manifest);
    s.store->write(&first).throw_if_error();
  }
  s.progress = std::make_unique<Progress>("derive " + split + " at " + s.manifest.split_at, n,
                                          o.progress);
  const std::vector<int64_t>& shape = s.manifest.record_shapes.at(0);
  int64_t per_sample = 1;
  for (int64_t d : shape) per_sample *= d;

  ChunkWriter writer(s);
  Batch batch;
  std::vector<int64_t> compute;
  for (int64_t lo = 0; lo < n; lo += o.batch) {
    const int64_t hi = std::min(n, lo + o.batch);
    // Distinct keys of the chunk not written yet: one forward each.
    compute.clear();
    std::vector<Key> keys;
    for (int64_t i = lo; i < hi; ++i) {
      if (s.present.insert(index[i].key).second) {
        compute.push_back(i);
        keys.push_back(index[i].key);
      }
    }
    StagedWrite w;
    w.batch = std::make_unique<ActivationStore::Batch>(*s.store);
    if (!compute.empty()) {
      const int64_t m = static_cast<int64_t>(compute.size());
      source.load(compute.data(), m, &batch);
      const auto started = std::chrono::steady_clock::now();
      torch::Tensor out = blocks.forward(batch.features()).to(torch::kCPU, torch::kFloat32).contiguous();
      s.report.prefix_seconds += seconds_since(started);
      if (out.size(0) != m || out.sizes().slice(1).vec() != shape) {
        throw std::runtime_error("the frozen blocks made outputs of shape " +
                                 shape_string(out.sizes().vec()) + ", the level's records are " +
                                 shape_string(shape) + " per sample");
      }
      const float* base_ptr = out.data_ptr<float>();
      std::vector<std::string> records(static_cast<size_t>(m));
      parallel_loop(m, [&](int64_t r) {
        records[r] = encode_record(codec, {FloatArrayRef{base_ptr + r * per_sample, shape}});
      });
      for (int64_t r = 0; r < m; ++r) w.batch->put_record(keys[r], records[r]);
      s.report.computed += m;
      s.manifest.records += m;
      s.manifest.record_bytes += static_cast<int64_t>(w.batch->record_bytes());
    }
    for (int64_t i = lo; i < hi; ++i) w.batch->put_index(split, i, index[i]);
    w.samples = hi - lo;
    w.batch->put_manifest(s.manifest);  // counts stay consistent with the data after a crash
    writer.submit(std::move(w));
  }
  writer.finish();
  finish_split(s);
  level->computed = s.report.computed;
  level->samples += n;
}

}  // namespace

std::unique_ptr<ActivationStore> open_level_read_only(const std::string& dir, Manifest* manifest) {
  StoreOptions so;
  so.read_only = true;
  std::unique_ptr<ActivationStore> store;
  ActivationStore::open(dir, so, &store).throw_if_error();
  store->read_manifest(manifest).throw_if_error();
  return store;
}

std::string level_dir(const std::string& levels_dir, const Manifest& m) {
  ContentHasher hasher;
  for (const std::string& field :
       {m.model, m.fingerprint, m.split_at, m.keyer, m.codec, m.preprocess}) {
    hasher.update_field(field);
  }
  hasher.update_u64(static_cast<uint64_t>(m.prefix_blocks));
  return (std::filesystem::path(levels_dir) /
          ("level-" + std::to_string(m.prefix_blocks) + "-" + m.split_at + "-" +
           hasher.digest().to_hex().substr(0, 16)))
      .string();
}

std::string derived_fingerprint(const std::string& base, const std::string& blocks) {
  ContentHasher hasher;
  hasher.update_field("derived");
  hasher.update_field(base);
  hasher.update_field(blocks);
  return hasher.digest().to_hex();
}

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
  Codec codec;
  if (!parse_codec(from_m.codec, &codec)) {
    throw std::runtime_error("level " + from_dir + " has codec '" + from_m.codec +
                             "', which this version does not know");
  }
  const SplitModel split = freeze_prefix(model, to_blocks);
  const BlockModel added = block_range(model, k, to_blocks);
  const InferencePrefix blocks(added, to_blocks - k);

  // The new level's manifest: the base's with the new split point, fingerprint and shapes.
  Manifest want = from_m;
  BlockStack added_stack;  // the added blocks alone (as_stack would bring the classifier)
  for (int64_t i = 0; i < added.num_blocks(); ++i) {
    added_stack->append(added.block_names[i], added.blocks[i]);
  }
  want.fingerprint = derived_fingerprint(from_m.fingerprint, module_fingerprint(*added_stack));
  want.split_at = split.split_at;
  want.prefix_blocks = to_blocks;
  {
    const RecordLayout base_layout = from_m.layout();
    std::vector<int64_t> probe_shape = {1};
    probe_shape.insert(probe_shape.end(), base_layout.at(0).shape.begin(),
                       base_layout.at(0).shape.end());
    const torch::Tensor probe = blocks.forward(torch::zeros(probe_shape, o.device));
    want.record_shapes = {probe.sizes().slice(1).vec()};
  }
  want.record_layout = RecordLayout();
  want.classifier = "pretrained";  // the head blob holds the classifier as it is now
  want.splits.clear();
  want.records = 0;
  want.record_bytes = 0;

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

  BuildOptions bo;
  bo.cache_dir = level.dir;
  bo.compression = o.compression;
  bo.batch = o.batch;
  BuildState s(bo);
  StoreOptions so;
  so.compression = compression_name(o.compression);
  ActivationStore::open(level.dir, so, &s.store).throw_if_error();
  s.manifest = want;
  {
    ActivationStore::Batch opening(*s.store);
    opening.put_manifest(s.manifest);
    opening.put_blob("head", module_to_bytes(*split.head));
    s.store->write(&opening, /*sync=*/true).throw_if_error();
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, info] : from_m.splits) {
    if (info.complete) derive_split(s, *from, from_m, name, blocks, codec, o, &level);
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
  const Codec codec = o.codec;
  const SplitModel split = freeze_prefix(model, to_blocks);
  Manifest identity;
  set_prefix_identity(model, split, &identity);
  identity.keyer = default_keyer_spec(/*text_data=*/false);
  identity.codec = codec_name(codec);
  identity.preprocess = preprocess_spec();

  LevelInfo level;
  level.dir = level_dir(levels_dir, identity);
  level.prefix_blocks = to_blocks;
  level.split_at = split.split_at;
  level.fingerprint = identity.fingerprint;
  level.source = "raw";
  std::filesystem::create_directories(levels_dir);
  const std::string weights =
      (std::filesystem::path(levels_dir) / (".weights-" + std::to_string(::getpid()) + ".pt"))
          .string();
  struct RemoveWeights {
    const std::string& path;
    ~RemoveWeights() { std::remove(path.c_str()); }
  } remove_weights{weights};
  save_block_model(model, weights);

  BuildOptions bo;
  bo.data = o.data;
  bo.model.weights = weights;
  bo.model.encoder = model.spec.substr(0, model.spec.find(':'));
  bo.split_at = split.split_at;
  bo.keyer = identity.keyer;
  bo.codec = o.codec;
  bo.compression = o.compression;
  bo.cache_dir = level.dir;
  bo.batch = o.batch;
  bo.threads = o.threads;
  bo.progress = o.progress;
  bo.device = o.device;
  std::vector<DatasetOptions> splits = {o.data};
  if (!o.eval_split.empty() && o.eval_split != "none") {
    DatasetOptions eval = o.data;
    eval.split = o.eval_split;
    eval.limit = 0;
    splits.push_back(eval);
  }
  bool reused = true;
  for (const DatasetOptions& d : splits) {
    bo.data = d;
    const BuildReport r = run_build(bo);
    reused = reused && r.computed == 0 && r.index_written == 0;
    level.computed += r.computed;
    level.samples += r.samples;
  }
  level.reused = reused;
  level.seconds = seconds_since(start);
  return level;
}

}  // namespace recycle
