#include "engine/precompute/build_stages.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "base/strings.h"
#include "cache/record.h"
#include "engine/data/byte_tokenizer.h"
#include "engine/models/block_model.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/model_setup.h"
#include "engine/models/preprocess.h"
#include "engine/models/transformer.h"
#include "engine/models/weights_io.h"
#include "engine/precompute/cache_input.h"
#include "engine/precompute/prefix_identity.h"
#include "engine/util/parallel_loop.h"
#include "engine/util/progress.h"
#include "keyers/keyer_registry.h"
#include "keyers/text_keyer.h"
#include "recycle/errors.h"

namespace recycle {

struct BuildModel {
  explicit BuildModel(const std::string& device_name) : device(device_name) {}
  torch::Device device;
  std::optional<PreparedModel> prepared;
  std::optional<InferencePrefix> fast;  // the prepared prefix, folded: what records come from
  // The head blob of a new cache, when it is not prepared's head (a build from another cache).
  std::string head_blob;
};

BuildState::BuildState(BuildOptions o)
    : options(std::move(o)), start(std::chrono::steady_clock::now()) {}
BuildState::~BuildState() = default;

namespace {

// Samples keyed per chunk of a streamed split: 4096 images are 3 MB at 28x28.
constexpr int64_t kKeyChunk = 4096;

// The samples positions[0..n) of a streamed split as a dataset of n samples holding their
// pixels (ids and labels too), so they go through Dataset::key_input and image_batch as the
// samples of a dataset loaded whole do.
Dataset read_samples(const Dataset& data, ImageStream& stream, const int64_t* positions,
                     int64_t n) {
  Dataset chunk;
  chunk.item_shape = data.item_shape;
  chunk.transform = data.transform;
  chunk.float_pixels = data.float_pixels;
  chunk.norm_mean = data.norm_mean;
  chunk.norm_std = data.norm_std;
  chunk.pixels.resize(static_cast<size_t>(n * data.item_bytes()));
  stream.read(positions, n, chunk.pixels.data());
  chunk.labels.reserve(n);
  chunk.ids.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    chunk.labels.push_back(data.labels[positions[i]]);
    chunk.ids.push_back(data.ids[positions[i]]);
  }
  return chunk;
}

// After the first pass dropped the files it could not decode, the second reads only files that
// decoded then: one that fails now (changed on disk since) stops the build.
void require_no_skips(const ImageStream& stream) {
  const auto skipped = stream.skipped();
  if (!skipped.empty()) {
    throw std::runtime_error(skipped.front().second + " (it decoded when the split was keyed)");
  }
}

// The samples chunk.compute_pos of a chunk whose pixels a ChunkReader read (those of
// todo[chunk.begin, chunk.end)), as read_samples gives them.
Dataset chunk_samples(const BuildState& s, const BuildChunk& chunk) {
  const Dataset& data = s.data;
  const int64_t item = data.item_bytes();
  const auto first = s.todo.begin() + static_cast<std::ptrdiff_t>(chunk.begin);
  const auto last = s.todo.begin() + static_cast<std::ptrdiff_t>(chunk.end);
  Dataset out;
  out.item_shape = data.item_shape;
  out.transform = data.transform;
  out.float_pixels = data.float_pixels;
  out.norm_mean = data.norm_mean;
  out.norm_std = data.norm_std;
  out.pixels.resize(chunk.compute_pos.size() * static_cast<size_t>(item));
  for (size_t i = 0; i < chunk.compute_pos.size(); ++i) {
    const int64_t pos = chunk.compute_pos[i];
    const auto at = std::lower_bound(first, last, pos);
    if (at == last || *at != pos) {
      throw std::logic_error("a chunk computes a sample outside its range");
    }
    std::memcpy(out.pixels.data() + i * item, chunk.pixels.data() + (at - first) * item,
                static_cast<size_t>(item));
    out.labels.push_back(data.labels[pos]);
    out.ids.push_back(data.ids[pos]);
  }
  return out;
}

// Keys of data's samples [0, n) into keys[offset..), in parallel.
void key_range(const Dataset& data, const Keyer& keyer, int64_t offset, std::vector<Key>* keys) {
  parallel_loop(static_cast<int64_t>(data.size()), [&](int64_t i) {
    TensorView view;
    (*keys)[offset + i] = keyer.key(data.key_input(static_cast<size_t>(i), &view));
  });
}

// Keys of every sample; a streamed split is read a chunk at a time, then checked to its end.
// The samples whose file was skipped (--on-bad-file skip) go to *skipped (their keys are of
// zeros: the caller drops them).
std::vector<Key> compute_keys(const Dataset& data, const StreamedImages& streamed,
                              const Keyer& keyer,
                              std::vector<std::pair<int64_t, std::string>>* skipped) {
  std::vector<Key> keys(data.size());
  skipped->clear();
  if (!streamed.streamed()) {
    key_range(data, keyer, 0, &keys);
    return keys;
  }
  ImageStream stream(data, streamed);
  const int64_t n = static_cast<int64_t>(data.size());
  std::vector<int64_t> positions;
  for (int64_t lo = 0; lo < n; lo += kKeyChunk) {
    const int64_t hi = std::min(n, lo + kKeyChunk);
    positions.resize(hi - lo);
    for (int64_t i = lo; i < hi; ++i) positions[i - lo] = i;
    key_range(read_samples(data, stream, positions.data(), hi - lo), keyer, lo, &keys);
  }
  stream.finish();
  *skipped = stream.skipped();
  return keys;
}

// The manifest this run asks for: identity plus record shapes.
Manifest requested_manifest(PreparedModel& pm, const std::string& keyer_spec, Codec codec,
                            const Dataset& data, const torch::Device& device) {
  Manifest m;
  set_prefix_identity(pm.model, pm.split, &m);
  m.keyer = keyer_spec;
  m.codec = codec_name(codec);
  m.preprocess = preprocess_spec(data);
  m.input_shape = data.item_shape;
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape = {1};
  shape.insert(shape.end(), data.item_shape.begin(), data.item_shape.end());
  torch::Tensor probe = pm.split.prefix->forward(torch::zeros(shape, device));
  m.record_shapes = {probe.sizes().slice(1).vec()};
  m.class_names = data.class_names;
  m.classifier = pm.classifier_is_new ? "new" : "pretrained";
  return m;
}

// The manifest a text run asks for: identity, the tokenizer as its preprocessing, and the
// text record layout (text_record_layout).
Manifest requested_text_manifest(const PreparedModel& pm, const std::string& keyer_spec,
                                 Codec codec, const Dataset& data) {
  Manifest m;
  set_prefix_identity(pm.model, pm.split, &m);
  m.keyer = keyer_spec;
  m.codec = codec_name(codec);
  m.preprocess = byte_tokenizer_spec();
  m.input_shape = {transformer_max_tokens(pm.model.spec)};
  m.record_layout = text_record_layout(resolve_encoder_spec(pm.model.spec).get("d_model"), codec);
  m.record_shapes = layout_shapes(m.record_layout);
  m.class_names = data.class_names;
  m.classifier = pm.classifier_is_new ? "new" : "pretrained";
  return m;
}

// What the prefix reads for a text: the text as the keyer hashes it (so samples that share a
// key share a record that is a function of the key), or the text itself for other keyers.
std::string model_text(const Keyer& keyer, const std::string& text) {
  const auto* text_keyer = dynamic_cast<const TextKeyer*>(&keyer);
  return text_keyer != nullptr ? text_keyer->normalized(text) : text;
}

// Refuses a text that the keyer's normalisation empties (only white space), before the cache
// is opened.
void check_model_texts(const Dataset& data, const Keyer& keyer, const std::string& source) {
  for (size_t i = 0; i < data.size(); ++i) {
    if (model_text(keyer, data.texts[i]).empty()) {
      throw std::runtime_error(source + ": sample " + data.ids[i] + " has no text left after " +
                               "the keyer's normalisation (" + keyer.spec() + ")");
    }
  }
}

// Stops the build cleanly while the cache's filesystem still has room: RocksDB needs headroom
// to flush its memtables (up to ~96 MB here), and Debian's RocksDB aborts on an assertion
// rather than returning an error when a write fails for lack of space.
constexpr uint64_t kFreeSpaceReserve = 96ull << 20;

}  // namespace

void check_free_space(const std::string& dir, uint64_t batch_bytes) {
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (ec) return;  // cannot tell; RocksDB will report real errors
  const uint64_t need = kFreeSpaceReserve + 2 * batch_bytes;
  if (space.available < need) {
    throw std::runtime_error(
        "not enough free space for cache " + dir + ": " + std::to_string(space.available >> 20) +
        " MB free, the build stops "
        "below " +
        std::to_string(need >> 20) + " MB (what it wrote so far is kept; rerun to resume)");
  }
}

namespace {

void write(BuildState& s, ActivationStore::Batch* batch) {
  s.store->write(batch).throw_if_error();
  ++s.writes;
}

// A chunk's records and index entries (or the split's last manifest), without the write-ahead
// log: a crash loses the writes since the last flush, which a rerun computes again (plan_split
// resumes from the index that survived; records and index flush together).
void write_unlogged(BuildState& s, ActivationStore::Batch* batch) {
  s.store->write_unlogged(batch).throw_if_error();
  ++s.writes;
}

}  // namespace

void load_inputs(BuildState& s) {
  const BuildOptions& o = s.options;
  o.validate();
  s.codec = o.codec;
  ActivationStore::check_split_name(o.data.split).throw_if_error();
  set_thread_count(o.threads);
  s.model = std::make_unique<BuildModel>(o.device);

  s.data = load_dataset(o.data, &s.streamed);
  const std::string keyer_spec = o.keyer.empty() ? default_keyer_spec(s.data.is_text) : o.keyer;
  s.keyer = make_keyer(keyer_spec);
  if (s.data.is_text) check_model_texts(s.data, *s.keyer, o.data.spec);

  s.model->prepared.emplace(prepare_model(o.model, s.data, o.recycle, o.split_at, s.model->device));
  PreparedModel& pm = *s.model->prepared;
  if (pm.split.prefix_blocks == 0) {
    throw std::invalid_argument(
        "--recycle 0 caches nothing; train without a cache with recycle-train --recycle 0");
  }
  if (s.data.is_text) {
    // The plain prefix (eval mode) makes text records: nothing of a transformer folds.
    s.manifest = requested_text_manifest(pm, s.keyer->spec(), s.codec, s.data);
    return;
  }
  s.manifest = requested_manifest(pm, s.keyer->spec(), s.codec, s.data, s.model->device);
  s.model->fast.emplace(pm.model, pm.split.prefix_blocks);
}

void load_cache_input(BuildState& s, CacheBuildInputs in) {
  const BuildOptions& o = s.options;
  if (o.batch < 1) throw std::invalid_argument("--batch must be at least 1");
  if (o.cache_dir.empty()) throw std::invalid_argument("--cache DIR is required");
  ActivationStore::check_split_name(o.data.split).throw_if_error();
  if (!parse_codec(in.manifest.codec, &s.codec)) {
    throw std::runtime_error("the cache's codec '" + in.manifest.codec +
                             "' is not one this version knows (" + join(codec_names(), ", ") + ")");
  }
  s.model = std::make_unique<BuildModel>(o.device);
  s.model->fast.emplace(*in.blocks, in.blocks->num_blocks());
  s.model->head_blob = std::move(in.head);
  s.data = Dataset();
  s.data.description = std::move(in.data);
  s.data.class_names = in.manifest.class_names;
  s.data.labels.reserve(in.input->index().size());
  for (const IndexEntry& e : in.input->index()) s.data.labels.push_back(e.label);
  s.streamed = StreamedImages();
  s.manifest = std::move(in.manifest);
  s.cache_input = std::move(in.input);
}

void reconcile_manifest(BuildState& s) {
  const std::string& dir = s.options.cache_dir;
  if (s.options.rebuild) ActivationStore::destroy(dir).throw_if_error();
  StoreOptions so;
  so.compression = compression_name(s.options.compression);
  ActivationStore::open(dir, so, &s.store).throw_if_error();
  s.opening = std::make_unique<ActivationStore::Batch>(*s.store);

  Manifest stored;
  const Status have = s.store->read_manifest(&stored);
  if (have.is_not_found()) {
    s.opening->put_blob("head", s.model->prepared ? module_to_bytes(*s.model->prepared->split.head)
                                                  : s.model->head_blob);
    return;
  }
  have.throw_if_error();
  const Manifest& wanted = s.manifest;
  const auto diffs = stored.identity().identity_differences(wanted.identity());
  if (!diffs.empty()) {
    throw StaleCacheError(mismatch_message(dir, diffs, "use --rebuild to start over"));
  }
  if (stored.class_names != wanted.class_names) {
    throw std::runtime_error("cache " + dir +
                             " holds other classes than this data (check --classes)");
  }
  // Caches made before the input shape was stored are checked by their record shapes.
  if (stored.record_shapes != wanted.record_shapes) {
    throw std::runtime_error("cache " + dir + " stores records of shape " +
                             (stored.record_shapes.size() == 1
                                  ? shape_string(stored.record_shapes[0])
                                  : std::to_string(stored.record_shapes.size()) + " tensors") +
                             ", this prefix makes " + shape_string(wanted.record_shapes.at(0)) +
                             " from inputs of " + shape_string(wanted.input_shape) +
                             " (use --rebuild to start over)");
  }
  if (stored.input_shape.empty()) stored.input_shape = wanted.input_shape;
  s.manifest = stored;
}

void key_samples(BuildState& s) {
  if (s.cache_input) {
    s.keys.clear();
    s.keys.reserve(s.cache_input->index().size());
    for (const IndexEntry& e : s.cache_input->index()) s.keys.push_back(e.key);
  } else {
    std::vector<std::pair<int64_t, std::string>> skipped;
    s.keys = compute_keys(s.data, s.streamed, *s.keyer, &skipped);
    if (!skipped.empty()) {  // files that could not be decoded, left out with their samples
      report_skipped(s.streamed.file, skipped);
      std::vector<int64_t> drop;
      for (const auto& k : skipped) drop.push_back(k.first);
      drop_samples(drop, &s.data, &s.streamed);
      size_t kept = 0, d = 0;
      for (size_t i = 0; i < s.keys.size(); ++i) {
        if (d < drop.size() && drop[d] == static_cast<int64_t>(i)) {
          ++d;
          continue;
        }
        s.keys[kept++] = s.keys[i];
      }
      s.keys.resize(kept);
      if (s.keys.empty()) throw std::runtime_error(s.streamed.file + ": every file was skipped");
    }
  }
  const std::unordered_set<Key, KeyHash> distinct(s.keys.begin(), s.keys.end());
  s.report.cache_dir = s.options.cache_dir;
  s.report.split = s.options.data.split;
  s.report.samples = static_cast<int64_t>(s.keys.size());
  s.report.unique = static_cast<int64_t>(distinct.size());
  s.keyed = true;
}

void plan_split(BuildState& s) {
  const std::string& split = s.options.data.split;
  s.existing.clear();
  s.store->read_index(split, &s.existing).throw_if_error();
  if (!s.keyed) key_samples(s);
  const int64_t n = static_cast<int64_t>(s.data.size());

  // Positions whose index entry must be written: new, or different from what is stored.
  s.todo.clear();
  for (int64_t i = 0; i < n; ++i) {
    const IndexEntry want{s.keys[i], s.data.labels[i]};
    if (i >= static_cast<int64_t>(s.existing.size()) || !(s.existing[i] == want)) {
      s.todo.push_back(i);
    }
  }
  const auto it = s.manifest.splits.find(split);
  s.unchanged = s.todo.empty() && static_cast<int64_t>(s.existing.size()) == n &&
                it != s.manifest.splits.end() && it->second.complete &&
                it->second.data == s.data.description;
  // Keys known to have a record: everything the stored index points to.
  s.present.clear();
  for (const IndexEntry& e : s.existing) s.present.insert(e.key);
  s.had_records = false;
  s.store
      ->for_each_record([&](const Key&, std::string_view) {
        s.had_records = true;
        return false;  // one is enough
      })
      .throw_if_error();
  s.next = 0;
}

void begin_split(BuildState& s) {
  const std::string& split = s.options.data.split;
  const int64_t n = s.report.samples;
  SplitInfo& info = s.manifest.splits[split];
  info.data = s.data.description;
  info.samples = n;
  info.unique = s.report.unique;
  info.complete = false;
  ActivationStore::Batch& first = *s.opening;
  first.put_manifest(s.manifest);
  if (static_cast<int64_t>(s.existing.size()) > n) first.truncate_index(split, n);
  write(s, &first);
  s.opening = std::make_unique<ActivationStore::Batch>(*s.store);  // written once
  const std::string label =
      s.cache_input ? "derive " + split + " at " + s.manifest.split_at : "build " + split;
  s.progress =
      std::make_unique<Progress>(label, static_cast<int64_t>(s.todo.size()), s.options.progress);
}

bool next_chunk(BuildState& s, BuildChunk* chunk) {
  *chunk = BuildChunk();
  if (s.next >= s.todo.size()) return false;
  chunk->begin = s.next;
  chunk->end = std::min(s.todo.size(), s.next + static_cast<size_t>(s.options.batch));
  s.next = chunk->end;
  return true;
}

void find_missing(BuildState& s, BuildChunk* chunk) {
  // Distinct keys of this chunk that are not known to be stored yet.
  std::vector<Key> unknown;
  std::vector<int64_t> unknown_pos;
  std::unordered_set<Key, KeyHash> in_chunk;
  for (size_t t = chunk->begin; t < chunk->end; ++t) {
    const Key& k = s.keys[s.todo[t]];
    if (!s.present.count(k) && in_chunk.insert(k).second) {
      unknown.push_back(k);
      unknown_pos.push_back(s.todo[t]);
    }
  }
  // A store that held no record when the run began has only what this run wrote: `present`.
  std::vector<Status> found(unknown.size(), Status::not_found(""));
  if (s.had_records)
    s.store->multi_get(
        unknown, [](size_t, std::string_view) {}, &found);
  chunk->compute_pos.clear();
  chunk->compute_keys.clear();
  for (size_t u = 0; u < unknown.size(); ++u) {
    if (found[u].ok()) {
      s.present.insert(unknown[u]);
    } else if (found[u].is_not_found()) {
      chunk->compute_pos.push_back(unknown_pos[u]);
      chunk->compute_keys.push_back(unknown[u]);
    } else {
      found[u].throw_if_error();
    }
  }
}

namespace {

// The codec's refusal of a sample's values, as one line that names the sample.
[[noreturn]] void throw_for_sample(const Dataset& data, int64_t pos, const CodecRangeError& e) {
  const std::string id = pos < static_cast<int64_t>(data.ids.size()) ? data.ids[pos] + " " : "";
  throw CodecRangeError("sample " + id + "(position " + std::to_string(pos) + "): " + e.what(),
                        e.largest());
}

// compute_chunk for text: the chunk's texts tokenized and padded to the longest, the prefix's
// packed features [m, L, D + 1], and per sample a record of its valid positions' hidden states
// [length, D] and its length.
void compute_text_chunk(BuildState& s, BuildChunk* chunk) {
  const int64_t m = static_cast<int64_t>(chunk->compute_pos.size());
  const BlockModel& model = s.model->prepared->model;
  std::vector<std::string> texts(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i)
    texts[i] = model_text(*s.keyer, s.data.texts[chunk->compute_pos[i]]);
  const torch::Tensor tokens =
      token_batch(texts, transformer_max_tokens(model.spec), s.model->device);
  const auto started = std::chrono::steady_clock::now();
  const std::vector<int64_t>& shape = s.manifest.record_shapes.at(0);  // {-1, D}
  const int64_t d = shape.at(1), length = tokens.size(1);
  torch::Tensor hidden;  // [m, L, D], contiguous on the CPU
  {
    c10::InferenceMode inference;
    const torch::Tensor out =
        s.model->prepared->split.prefix->forward(tokens).to(torch::kCPU, torch::kFloat32);
    if (out.dim() != 3 || out.size(0) != m || out.size(1) != length || out.size(2) != d + 1) {
      throw std::runtime_error("the prefix made outputs of shape " +
                               shape_string(out.sizes().vec()) + ", the cache's records are " +
                               shape_string(shape) + " per sample");
    }
    hidden = out.narrow(2, 0, d).contiguous();
  }
  s.report.prefix_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const torch::Tensor lengths = tokens.ne(kPadToken).sum(1).to(torch::kCPU).contiguous();
  const float* base = hidden.data_ptr<float>();
  const int64_t* len = lengths.data_ptr<int64_t>();
  const Codec codec = s.codec;
  chunk->records.resize(m);
  parallel_loop(m, [&](int64_t r) {
    try {
      chunk->records[r] =
          encode_record({TypedArrayRef::floats(base + r * length * d, {len[r], d}, codec),
                         TypedArrayRef::exact(len + r, {})});
    } catch (const CodecRangeError& e) {
      throw_for_sample(s.data, chunk->compute_pos[r], e);
    }
  });
}

}  // namespace

RecordLayout text_record_layout(int64_t d_model, Codec codec) {
  return {TensorLayout{"hidden", Dtype::kFloat32, {kVariableDim, d_model}, codec_name(codec)},
          TensorLayout{"length", Dtype::kInt64, {}, kRawCodecName}};
}

void compute_chunk(BuildState& s, BuildChunk* chunk) {
  chunk->records.clear();
  if (chunk->compute_pos.empty()) return;
  if (s.data.is_text) {
    compute_text_chunk(s, chunk);
    return;
  }
  const std::vector<int64_t>& shape = s.manifest.record_shapes.at(0);
  int64_t per_sample = 1;
  for (int64_t d : shape) per_sample *= d;

  const int64_t m = static_cast<int64_t>(chunk->compute_pos.size());
  const torch::Device& device = s.model->device;
  torch::Tensor images;  // the prefix's input: images, or the records of another cache
  if (s.cache_input) {
    images = s.cache_input->read(chunk->compute_pos.data(), m);
  } else if (s.streamed.streamed()) {  // read by a ChunkReader (chunk->pixels) or here
    std::vector<int64_t> all(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) all[i] = i;
    if (chunk->pixels.empty() && !s.images) {
      s.images = std::make_unique<ImageStream>(s.data, s.streamed);
    }
    const Dataset read = chunk->pixels.empty()
                             ? read_samples(s.data, *s.images, chunk->compute_pos.data(), m)
                             : chunk_samples(s, *chunk);
    if (s.images) require_no_skips(*s.images);
    images = image_batch(read, all.data(), m, device);
  } else {
    images = image_batch(s.data, chunk->compute_pos.data(), m, device);
  }
  const auto started = std::chrono::steady_clock::now();
  torch::Tensor out = s.model->fast->forward(images).to(torch::kCPU, torch::kFloat32).contiguous();
  s.report.prefix_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // Records are cut from this buffer by the manifest's shape: check it every time.
  if (out.dim() < 1 || out.size(0) != m || out.sizes().slice(1).vec() != shape) {
    throw std::runtime_error("the prefix made outputs of shape " + shape_string(out.sizes().vec()) +
                             ", the cache's records are " + shape_string(shape) + " per sample");
  }
  const float* base = out.data_ptr<float>();
  const Codec codec = s.codec;
  chunk->records.resize(m);
  parallel_loop(m, [&](int64_t r) {
    try {
      chunk->records[r] = encode_record(codec, {FloatArrayRef{base + r * per_sample, shape}});
    } catch (const CodecRangeError& e) {
      throw_for_sample(s.data, chunk->compute_pos[r], e);
    }
  });
}

StagedWrite stage_write(BuildState& s, BuildChunk* chunk) {
  const std::string& split = s.options.data.split;
  StagedWrite w;
  w.batch = std::make_unique<ActivationStore::Batch>(*s.store);
  ActivationStore::Batch& batch = *w.batch;
  if (!chunk->records.empty()) {
    const int64_t m = static_cast<int64_t>(chunk->records.size());
    for (int64_t r = 0; r < m; ++r) {
      batch.put_record(chunk->compute_keys[r], chunk->records[r]);
      s.present.insert(chunk->compute_keys[r]);
    }
    chunk->records.clear();  // the batch holds its own copy
    s.report.computed += m;
    s.report.bytes += static_cast<int64_t>(batch.record_bytes());
    s.manifest.records += m;
    s.manifest.record_bytes += static_cast<int64_t>(batch.record_bytes());
  }
  for (size_t t = chunk->begin; t < chunk->end; ++t) {
    const int64_t pos = s.todo[t];
    batch.put_index(split, pos, IndexEntry{s.keys[pos], s.data.labels[pos]});
  }
  w.samples = static_cast<int64_t>(chunk->end - chunk->begin);
  s.report.index_written += w.samples;
  batch.put_manifest(s.manifest);  // counts stay consistent with the data after a crash
  return w;
}

void write_staged(BuildState& s, StagedWrite* w) {
  check_free_space(s.options.cache_dir, w->batch->record_bytes());
  write_unlogged(s, w->batch.get());
  if (s.progress) s.progress->advance(w->samples);
}

void write_chunk(BuildState& s, BuildChunk* chunk) {
  StagedWrite w = stage_write(s, chunk);
  write_staged(s, &w);
}

ChunkWriter::~ChunkWriter() {
  if (pending_.valid()) pending_.wait();
}

void ChunkWriter::submit(StagedWrite w) {
  finish();
  current_ = std::move(w);
  pending_ = std::async(std::launch::async, [this] { write_staged(s_, &current_); });
}

void ChunkWriter::finish() {
  if (!pending_.valid()) return;
  pending_.get();  // rethrows the write's error
  current_ = StagedWrite();
}

ChunkReader::ChunkReader(BuildState& s) : s_(s) {
  if (!s_.streamed.streamed() || s_.data.is_text) return;
  stream_ = std::make_unique<ImageStream>(s_.data, s_.streamed);
  start(s_.next);
}

ChunkReader::~ChunkReader() {
  if (ahead_.valid()) ahead_.wait();
}

void ChunkReader::start(size_t begin) {
  ahead_begin_ = begin;
  if (begin >= s_.todo.size()) return;
  const size_t end = std::min(s_.todo.size(), begin + static_cast<size_t>(s_.options.batch));
  // todo is not changed while the chunk loop runs.
  const int64_t* positions = s_.todo.data() + begin;
  const int64_t n = static_cast<int64_t>(end - begin);
  const int64_t item = s_.data.item_bytes();
  ImageStream* stream = stream_.get();
  ahead_ = std::async(std::launch::async, [stream, positions, n, item] {
    std::vector<uint8_t> pixels(static_cast<size_t>(n * item));
    stream->read(positions, n, pixels.data());
    require_no_skips(*stream);
    return pixels;
  });
}

void ChunkReader::read(BuildChunk* chunk) {
  if (!stream_) return;
  if (!ahead_.valid() || chunk->begin != ahead_begin_) {
    throw std::logic_error("ChunkReader::read: chunks must come from next_chunk, in order");
  }
  chunk->pixels = ahead_.get();  // rethrows the read's error
  start(chunk->end);
}

void finish_split(BuildState& s) {
  if (s.progress) s.progress->finish();
  s.manifest.splits[s.options.data.split].complete = true;
  ActivationStore::Batch last(*s.store);
  last.put_manifest(s.manifest);
  write_unlogged(s, &last);
  s.store->flush().throw_if_error();  // the chunks and the completed manifest, durable together
}

BuildReport build_report(const BuildState& s) {
  BuildReport report = s.report;
  report.records = s.manifest.records;
  report.skipped = report.samples - report.computed;
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
  report.samples_per_s = report.seconds > 0 ? report.samples / report.seconds : 0.0;
  return report;
}

}  // namespace recycle
