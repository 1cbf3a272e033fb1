#include "engine/precompute/build_stages.h"

#include "engine/precompute/prefix_runner.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
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
#include "keyers/text_keyer.h"
#include "keyers/view_key.h"
#include "recycle/errors.h"
#include "recycle/keyer.h"

namespace recycle {

SplitBuild::SplitBuild(BuildOptions o)
    : options_(std::move(o)), start_(std::chrono::steady_clock::now()) {}
SplitBuild::~SplitBuild() = default;

namespace {

// Samples keyed per chunk of a streamed split: 4096 images are 3 MB at 28x28.
constexpr int64_t kKeyChunk = 4096;

// A dataset of no samples with data's item shape and pixel form (transform, pixel type,
// normalisation): what a chunk of data's samples is filled into.
Dataset samples_like(const Dataset& data) {
  Dataset out;
  out.item_shape = data.item_shape;
  out.transform = data.transform;
  out.float_pixels = data.float_pixels;
  out.norm_mean = data.norm_mean;
  out.norm_std = data.norm_std;
  return out;
}

// The samples positions[0..n) of a streamed split as a dataset of n samples holding their
// pixels (ids and labels too), so they go through Dataset::key_input and image_batch as the
// samples of a dataset loaded whole do.
Dataset read_samples(const Dataset& data, ImageStream& stream, const int64_t* positions,
                     int64_t n) {
  Dataset chunk = samples_like(data);
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

// The absolute path of a --weights file, for the manifest ("" for none).
std::string weights_path(const std::string& weights) {
  if (weights.empty()) return "";
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(weights, ec);
  return ec ? weights : p.lexically_normal().string();
}

// Keys of data's samples [0, n) into keys[offset..), in parallel.
void key_range(const Dataset& data, const Keyer& keyer, int64_t offset, std::vector<Key>* keys) {
  parallel_loop(static_cast<int64_t>(data.size()), [&](int64_t i) {
    TensorView view;
    (*keys)[offset + i] = keyer.key(data.key_input(static_cast<size_t>(i), &view));
  });
}

// A streamed split's files are read twice: to key them, then to compute the ones with no
// record. A file that changed in between would store one image's activation under the other's
// key, forever. `read` holds what the compute pass read for `positions`; its keys must be the
// ones the key pass made (`keys`, by position), or the build stops naming the sample.
void require_keyed_content(const Dataset& read, const int64_t* positions, int64_t n,
                           const std::vector<Key>& keys, const Keyer& keyer, const std::string& where) {
  if (keys.empty()) return;  // nothing keyed on this rank to compare with
  std::vector<Key> now(static_cast<size_t>(n));
  key_range(read, keyer, 0, &now);
  for (int64_t i = 0; i < n; ++i) {
    if (!(now[i] == keys[static_cast<size_t>(positions[i])])) {
      throw std::runtime_error(where + ": sample " + read.ids[static_cast<size_t>(i)] +
                               " changed while the build ran (its content is not what was keyed): "
                               "nothing of its chunk was stored; run the build again");
    }
  }
}

// A class whose every file was left out (--on-bad-file skip) is still a class of the split (the
// head keeps its output), but nothing trains it: said on stderr, naming it.
void warn_emptied_classes(const Dataset& data, const std::vector<int64_t>& before,
                          const std::string& where) {
  std::vector<int64_t> after(before.size(), 0);
  for (int64_t l : data.labels) ++after[static_cast<size_t>(l)];
  for (size_t c = 0; c < before.size(); ++c) {
    if (before[c] > 0 && after[c] == 0) {
      std::cerr << "warning: " << where << ": class '" << printable(data.class_names[c])
                << "' lost all its " << before[c]
                << " file(s) (left out: not decodable); it has no sample in this split" << std::endl;
    }
  }
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
  m.classifier = classifier_word(pm.classifier_is_new);
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
  m.classifier = classifier_word(pm.classifier_is_new);
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

}  // namespace

Dataset SplitBuild::chunk_samples(const BuildChunk& chunk,
                                  const std::vector<int64_t>& positions) const {
  const Dataset& data = data_;
  const int64_t item = data.item_bytes();
  const auto first = plan_.todo().begin() + static_cast<std::ptrdiff_t>(chunk.begin);
  const auto last = plan_.todo().begin() + static_cast<std::ptrdiff_t>(chunk.end);
  Dataset out = samples_like(data);
  out.pixels.resize(positions.size() * static_cast<size_t>(item));
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t pos = positions[i];
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

void SplitBuild::load_inputs() {
  const BuildOptions& o = options_;
  o.validate();
  codec_ = o.codec;
  ActivationStore::check_split_name(o.data.split).throw_if_error();
  set_thread_count(o.threads);
  prefix_ = std::make_unique<PrefixRunner>(o.device, o.precision);

  data_ = load_dataset(with_encoder_input(o.data, o.model), &streamed_);
  const std::string keyer_spec = o.keyer.empty() ? default_keyer_spec(data_.is_text) : o.keyer;
  keyer_ = make_keyer(keyer_spec);
  if (data_.is_text) check_model_texts(data_, *keyer_, o.data.spec);
  if (o.views > 0) {
    if (data_.is_text) {
      throw std::invalid_argument("--augment and --views apply to images; " + o.data.spec +
                                  " holds text");
    }
    if (data_.float_pixels || data_.item_shape.size() != 3) {
      throw std::invalid_argument("--augment needs images of uint8 pixels; " + o.data.spec +
                                  " holds float32 inputs, which are taken as they are");
    }
    augment_ = Augment::parse(o.augment);
    augment_.check_image(data_.item_shape[1], data_.item_shape[2]);
    views_ = o.views;
    plan_.set_views(augment_.spec(), views_);
  }

  // Images run the folded prefix; the plain one (eval mode) makes text records: nothing of a
  // transformer folds.
  prefix_->use_model(prepare_model(o.model, data_, o.recycle, o.split_at, prefix_->device()),
                     /*fold=*/!data_.is_text);
  PreparedModel& pm = prefix_->model();
  if (pm.split.prefix_blocks == 0) {
    throw std::invalid_argument(
        "--recycle 0 caches nothing; train without a cache with recycle-train --recycle 0");
  }
  manifest_ = data_.is_text ? requested_text_manifest(pm, keyer_->spec(), codec_, data_)
                            : requested_manifest(pm, keyer_->spec(), codec_, data_, prefix_->device());
  manifest_.weights_file = weights_path(o.model.weights);
  set_prefix_precision(o.precision, &manifest_);
}

void SplitBuild::load_cache_input(CacheBuildInputs in) {
  const BuildOptions& o = options_;
  if (o.batch < 1) throw std::invalid_argument("--batch must be at least 1");
  if (o.cache_dir.empty()) throw std::invalid_argument("--cache DIR is required");
  ActivationStore::check_split_name(o.data.split).throw_if_error();
  if (!parse_codec(in.manifest.codec, &codec_)) {
    throw std::runtime_error("the cache's codec '" + in.manifest.codec +
                             "' is not one this version knows (" + join(codec_names(), ", ") + ")");
  }
  // The blocks after the other cache's split point run in the arithmetic its prefix ran in.
  prefix_ = std::make_unique<PrefixRunner>(o.device, prefix_precision_of(in.manifest, o.cache_dir));
  prefix_->use_blocks(*in.blocks, std::move(in.head));
  data_ = Dataset();
  data_.description = std::move(in.data);
  data_.class_names = in.manifest.class_names;
  data_.labels.reserve(in.input->index().size());
  for (const IndexEntry& e : in.input->index()) data_.labels.push_back(e.label);
  streamed_ = StreamedImages();
  manifest_ = std::move(in.manifest);
  cache_input_ = std::move(in.input);
}

void SplitBuild::reconcile_manifest() {
  const std::string& dir = options_.cache_dir;
  if (options_.rebuild) ActivationStore::destroy(dir).throw_if_error();
  StoreOptions so;
  so.compression = options_.compression;
  ActivationStore::open(dir, so, &store_).throw_if_error();
  opening_ = std::make_unique<ActivationStore::Batch>(*store_);
  writer_ = std::make_unique<SplitWriter>(store_.get(), &manifest_, options_.data.split);

  Manifest stored;
  const Status have = store_->read_manifest(&stored);
  if (have.is_not_found()) {
    opening_->put_blob("head", prefix_->head_bytes());
    return;
  }
  have.throw_if_error();
  const Manifest& wanted = manifest_;
  const auto diffs = stored.identity().identity_differences(wanted.identity());
  if (!diffs.empty() && stored.fingerprint != wanted.fingerprint && !stored.weights_file.empty() &&
      options_.model.weights.empty() && !cache_input_) {
    // A missing option, not another setup: --rebuild would replace the records with those of a
    // prefix initialised at random.
    throw StaleCacheError("cache " + dir + " was built from --weights " + stored.weights_file +
                          ", and this run gives no --weights (its prefix would be initialised "
                          "at random): give --weights FILE");
  }
  if (!diffs.empty()) {
    throw StaleCacheError(mismatch_message(dir, diffs, "use --rebuild to start over"));
  }
  if (stored.class_names != wanted.class_names) {
    // The cache's classes are the first split's (build the training split first); a split may
    // hold fewer (a test split with no example of one): its labels take the cache's ids.
    adopt_class_names(&data_, stored.class_names, options_.data.split, "cache " + dir);
    manifest_.class_names = stored.class_names;
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
  if (!wanted.weights_file.empty()) stored.weights_file = wanted.weights_file;  // same fingerprint
  const auto split = stored.splits.find(options_.data.split);
  if (split != stored.splits.end() &&
      (split->second.views != views_ || split->second.augment != augment_.spec())) {
    auto views = [](int64_t k, const std::string& spec) {
      return k == 0 ? std::string("no views") : std::to_string(k) + " views of '" + spec + "'";
    };
    throw StaleCacheError(mismatch_message(
        dir,
        {"split " + options_.data.split + ": the cache has " +
         views(split->second.views, split->second.augment) + ", this run asks for " +
         views(views_, augment_.spec())},
        "use another --cache, or --rebuild to start over"));
  }
  manifest_ = stored;
}

void SplitBuild::key_samples() {
  std::vector<Key> keys;
  if (cache_input_) {
    keys.reserve(cache_input_->index().size());
    for (const IndexEntry& e : cache_input_->index()) keys.push_back(e.key);
  } else {
    std::vector<std::pair<int64_t, std::string>> skipped;
    keys = compute_keys(data_, streamed_, *keyer_, &skipped);
    if (!skipped.empty()) {  // files that could not be decoded, left out with their samples
      report_skipped(streamed_.file, skipped);
      report_.files_left_out = static_cast<int64_t>(skipped.size());
      std::vector<int64_t> drop;
      for (const auto& k : skipped) drop.push_back(k.first);
      std::vector<int64_t> before(data_.class_names.size(), 0);
      for (int64_t l : data_.labels) ++before[static_cast<size_t>(l)];
      drop_samples(drop, &data_, &streamed_);
      warn_emptied_classes(data_, before, streamed_.file);
      size_t kept = 0, d = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (d < drop.size() && drop[d] == static_cast<int64_t>(i)) {
          ++d;
          continue;
        }
        keys[kept++] = keys[i];
      }
      keys.resize(kept);
      if (keys.empty()) throw std::runtime_error(streamed_.file + ": every file was skipped");
    }
  }
  const std::unordered_set<Key, KeyHash> distinct(keys.begin(), keys.end());
  report_.cache_dir = options_.cache_dir;
  report_.split = options_.data.split;
  report_.samples = static_cast<int64_t>(keys.size());
  report_.unique = static_cast<int64_t>(distinct.size());
  plan_.set_keys(std::move(keys));
}

void SplitBuild::key_chunk(const BuildChunk& chunk, std::vector<Key>* keys) {
  if (cache_input_) throw std::logic_error("key_chunk: a build from another cache has its keys");
  const int64_t n = static_cast<int64_t>(chunk.end - chunk.begin);
  keys->resize(static_cast<size_t>(n));
  const int64_t* positions = plan_.todo().data() + chunk.begin;
  if (!streamed_.streamed()) {
    parallel_loop(n, [&](int64_t i) {
      TensorView view;
      (*keys)[i] = keyer_->key(data_.key_input(static_cast<size_t>(positions[i]), &view));
    });
    return;
  }
  BuildChunk all;  // every sample of the chunk, as compute_chunk would read them
  all.begin = chunk.begin;
  all.end = chunk.end;
  all.compute_pos.assign(positions, positions + n);
  all.pixels = chunk.pixels;
  if (all.pixels.empty() && !images_) images_ = std::make_unique<ImageStream>(data_, streamed_);
  key_range(all.pixels.empty() ? read_samples(data_, *images_, positions, n)
                               : chunk_samples(all, all.compute_pos),
            *keyer_, 0, keys);
}

size_t SplitBuild::chunk_size() const {
  const int64_t per_chunk = views_ > 0 ? options_.batch / views_ : options_.batch;
  return static_cast<size_t>(std::max<int64_t>(1, per_chunk));
}

void SplitBuild::set_compute_items(const std::vector<int64_t>& items, BuildChunk* chunk) const {
  plan_.from_items(items, &chunk->compute_pos, &chunk->compute_keys, &chunk->compute_views);
}

Dataset SplitBuild::view_samples(const BuildChunk& chunk) {
  const std::vector<int64_t>& pos = chunk.compute_pos;
  const int64_t m = static_cast<int64_t>(pos.size());
  std::vector<int64_t> distinct(pos);  // find_missing lists them in todo order, views inner
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (!std::is_sorted(distinct.begin(), distinct.end())) {
    throw std::logic_error("view_samples: a chunk's positions are not in order");
  }
  Dataset base;
  if (streamed_.streamed() && !chunk.pixels.empty()) {
    base = chunk_samples(chunk, distinct);
  } else if (streamed_.streamed()) {
    if (!images_) images_ = std::make_unique<ImageStream>(data_, streamed_);
    base = read_samples(data_, *images_, distinct.data(), static_cast<int64_t>(distinct.size()));
    require_no_skips(*images_);
  } else {
    base = samples_like(data_);
    const int64_t item = data_.item_bytes();
    base.pixels.resize(distinct.size() * static_cast<size_t>(item));
    for (size_t i = 0; i < distinct.size(); ++i) {
      std::memcpy(base.pixels.data() + i * item, data_.item_pixels(distinct[i]),
                  static_cast<size_t>(item));
    }
  }
  if (streamed_.streamed()) {
    require_keyed_content(base, distinct.data(), static_cast<int64_t>(distinct.size()),
                          plan_.keys(), *keyer_, streamed_.file);
  }
  Dataset out = samples_like(data_);
  const int64_t item = data_.item_bytes();
  out.pixels.resize(static_cast<size_t>(m * item));
  const std::vector<int64_t>& shape = data_.item_shape;
  parallel_loop(m, [&](int64_t r) {
    const size_t j =
        static_cast<size_t>(std::lower_bound(distinct.begin(), distinct.end(), pos[r]) -
                            distinct.begin());
    uint8_t* px = out.pixels.data() + r * item;
    std::memcpy(px, base.pixels.data() + j * item, static_cast<size_t>(item));
    augment_.apply(px, shape[0], shape[1], shape[2], view_seed(chunk.compute_keys[r]));
  });
  for (int64_t r = 0; r < m; ++r) {
    out.labels.push_back(data_.labels[pos[r]]);
    out.ids.push_back(data_.ids[pos[r]]);
  }
  return out;
}

void SplitBuild::plan_every_sample() { plan_.plan_every_sample(data_.size()); }

void SplitBuild::plan_split() {
  const std::string& split = options_.data.split;
  std::vector<IndexEntry> existing;
  store_->read_index(split, &existing).throw_if_error();
  if (!plan_.keyed()) key_samples();
  const auto it = manifest_.splits.find(split);
  const bool stored_complete = it != manifest_.splits.end() && it->second.complete &&
                               it->second.data == data_.description;
  bool had_records = false;
  store_
      ->for_each_record([&](const Key&, std::string_view) {
        had_records = true;
        return false;  // one is enough
      })
      .throw_if_error();
  plan_.plan(std::move(existing), data_.labels, stored_complete, had_records);
}

void SplitBuild::begin_split() {
  const std::string& split = options_.data.split;
  SplitInfo info;
  info.data = data_.description;
  info.samples = report_.samples;
  info.unique = report_.unique;
  info.augment = augment_.spec();
  info.views = views_;
  writer_->begin(info, static_cast<int64_t>(plan_.existing().size()), opening_.get());
  opening_ = std::make_unique<ActivationStore::Batch>(*store_);  // written once
  const std::string label =
      cache_input_ ? "derive " + split + " at " + manifest_.split_at : "build " + split;
  progress_ =
      std::make_unique<Progress>(label, static_cast<int64_t>(plan_.todo().size()),
                                 options_.progress);
}

bool SplitBuild::next_chunk(BuildChunk* chunk) {
  *chunk = BuildChunk();
  return plan_.next_chunk(chunk_size(), &chunk->begin, &chunk->end);
}

void SplitBuild::find_missing(BuildChunk* chunk) {
  plan_.find_missing(chunk->begin, chunk->end, *store_, &chunk->compute_pos, &chunk->compute_keys,
                     &chunk->compute_views);
}

namespace {

// The codec's refusal of a sample's values, as one line that names the sample.
[[noreturn]] void throw_for_sample(const Dataset& data, int64_t pos, const CodecRangeError& e) {
  const std::string id = pos < static_cast<int64_t>(data.ids.size()) ? data.ids[pos] + " " : "";
  throw CodecRangeError("sample " + id + "(position " + std::to_string(pos) + "): " + e.what(),
                        e.largest());
}

}  // namespace

RecordLayout text_record_layout(int64_t d_model, Codec codec) {
  return {TensorLayout{"hidden", Dtype::kFloat32, {kVariableDim, d_model}, codec_name(codec)},
          TensorLayout{"length", Dtype::kInt64, {}, kRawCodecName}};
}

void SplitBuild::compute_chunk(BuildChunk* chunk) {
  start_chunk(chunk);
  finish_chunk(chunk);
}

void SplitBuild::start_chunk(BuildChunk* chunk) {
  chunk->records.clear();
  chunk->started = false;
  if (chunk->compute_pos.empty()) return;
  const torch::Tensor inputs = chunk_inputs(chunk);
  chunk->input_length = inputs.dim() > 1 ? inputs.size(1) : 0;
  prefix_->start(inputs);
  chunk->started = true;
  for (const Key& k : chunk->compute_keys) plan_.mark_present(k);
}

void SplitBuild::finish_chunk(BuildChunk* chunk) {
  if (!chunk->started) return;
  chunk->started = false;
  const torch::Tensor outputs =
      checked_outputs(prefix_->finish(), static_cast<int64_t>(chunk->compute_pos.size()),
                      chunk->input_length);
  if (share_chunks_ < 2 && prefix_->has_model()) measure_prefix_share(outputs);
  encode_chunk_outputs(outputs, chunk);
}

void SplitBuild::measure_prefix_share(const torch::Tensor& outputs) {
  ++share_chunks_;
  const double head_per_sample = prefix_->head_seconds_per_sample(outputs);
  if (head_per_sample < 0 || prefix_->last_seconds() <= 0) return;
  const double prefix_per_sample = prefix_->last_seconds() / static_cast<double>(outputs.size(0));
  report_.prefix_share = prefix_per_sample / (prefix_per_sample + head_per_sample);
}

torch::Tensor SplitBuild::chunk_inputs(BuildChunk* chunk) {
  const int64_t m = static_cast<int64_t>(chunk->compute_pos.size());
  const torch::Device& device = prefix_->device();
  if (cache_input_) return cache_input_->read(chunk->compute_pos.data(), m);
  if (data_.is_text) {  // byte tokens of the texts as the keyer hashes them
    std::vector<std::string> texts(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i)
      texts[i] = model_text(*keyer_, data_.texts[chunk->compute_pos[i]]);
    return token_batch(texts, transformer_max_tokens(prefix_->model().model.spec), device);
  }
  if (views_ > 0) {
    std::vector<int64_t> all(static_cast<size_t>(m));
    std::iota(all.begin(), all.end(), int64_t{0});
    return image_batch(view_samples(*chunk), all.data(), m, device);
  }
  if (streamed_.streamed()) {  // read by a ChunkReader (chunk->pixels) or here
    std::vector<int64_t> all(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) all[i] = i;
    if (chunk->pixels.empty() && !images_) {
      images_ = std::make_unique<ImageStream>(data_, streamed_);
    }
    const Dataset read = chunk->pixels.empty()
                             ? read_samples(data_, *images_, chunk->compute_pos.data(), m)
                             : chunk_samples(*chunk, chunk->compute_pos);
    if (images_) require_no_skips(*images_);
    require_keyed_content(read, chunk->compute_pos.data(), m, plan_.keys(), *keyer_,
                          streamed_.file);
    return image_batch(read, all.data(), m, device);
  }
  return image_batch(data_, chunk->compute_pos.data(), m, device);
}

torch::Tensor SplitBuild::chunk_prefix_outputs(const torch::Tensor& inputs) {
  return checked_outputs(prefix_->run(inputs), inputs.size(0), inputs.dim() > 1 ? inputs.size(1) : 0);
}

torch::Tensor SplitBuild::checked_outputs(const torch::Tensor& out, int64_t m, int64_t length) {
  const std::vector<int64_t>& shape = manifest_.record_shapes.at(0);
  report_.prefix_seconds += prefix_->last_seconds();
  // Per sample: the record shape; text: the packed features [L, D + 1] of the chunk's longest L.
  const std::vector<int64_t> expected =
      data_.is_text ? std::vector<int64_t>{length, shape.at(1) + 1} : shape;
  // Records are cut from this buffer by the manifest's shape: check it every time.
  if (out.dim() < 1 || out.size(0) != m || out.sizes().slice(1).vec() != expected) {
    throw std::runtime_error("the prefix made outputs of shape " + shape_string(out.sizes().vec()) +
                             ", the cache's records are " + shape_string(shape) + " per sample");
  }
  return out;
}

void SplitBuild::encode_chunk_outputs(const torch::Tensor& outputs, BuildChunk* chunk) {
  const std::vector<int64_t>& shape = manifest_.record_shapes.at(0);
  const int64_t m = outputs.size(0);
  const Codec codec = codec_;
  chunk->records.resize(m);
  if (data_.is_text) {
    // Per text its valid positions' hidden states and its length (the mask channel's sum).
    const int64_t d = shape.at(1), length = outputs.size(1);
    const torch::Tensor hidden = outputs.narrow(2, 0, d).contiguous();
    const torch::Tensor lengths =
        outputs.select(2, d).sum(1).round().to(torch::kInt64).contiguous();
    const float* base = hidden.data_ptr<float>();
    const int64_t* len = lengths.data_ptr<int64_t>();
    for (int64_t r = 0; r < m; ++r) {
      if (len[r] < 1 || len[r] > length) {  // the mask channel is 1s then 0s (transformer.h)
        throw std::logic_error("text prefix output " + std::to_string(r) + " has a mask of " +
                               std::to_string(len[r]) + " valid positions of " +
                               std::to_string(length));
      }
    }
    parallel_loop(m, [&](int64_t r) {
      try {
        chunk->records[r] =
            encode_record({TypedArrayRef::floats(base + r * length * d, {len[r], d}, codec),
                           TypedArrayRef::exact(len + r, {})});
      } catch (const CodecRangeError& e) {
        throw_for_sample(data_, chunk->compute_pos[r], e);
      }
    });
    return;
  }
  int64_t per_sample = 1;
  for (int64_t d : shape) per_sample *= d;
  const float* base = outputs.data_ptr<float>();
  parallel_loop(m, [&](int64_t r) {
    try {
      chunk->records[r] = encode_record(codec, {FloatArrayRef{base + r * per_sample, shape}});
    } catch (const CodecRangeError& e) {
      throw_for_sample(data_, chunk->compute_pos[r], e);
    }
  });
}

StagedWrite SplitBuild::stage_write(BuildChunk* chunk) {
  StagedWrite w = writer_->stage();
  for (size_t r = 0; r < chunk->records.size(); ++r) {
    w.put_record(chunk->compute_keys[r], chunk->records[r]);
    plan_.mark_present(chunk->compute_keys[r]);
  }
  chunk->records.clear();  // the batch holds its own copy
  for (size_t t = chunk->begin; t < chunk->end; ++t) {
    const int64_t pos = plan_.todo()[t];
    w.put_index(pos, IndexEntry{plan_.keys()[pos], data_.labels[pos]});
  }
  writer_->seal(&w);
  report_.computed += w.records;
  report_.bytes += static_cast<int64_t>(w.record_bytes());
  report_.index_written += w.entries;
  return w;
}

void SplitBuild::write_staged(StagedWrite* w) {
  writer_->write(w);
  if (progress_) progress_->advance(w->entries);
}

void SplitBuild::write_chunk(BuildChunk* chunk) {
  StagedWrite w = stage_write(chunk);
  write_staged(&w);
}

ChunkWriter::~ChunkWriter() {
  if (pending_.valid()) pending_.wait();
}

void ChunkWriter::submit(StagedWrite w) {
  finish();
  current_ = std::move(w);
  pending_ = std::async(std::launch::async, [this] { b_.write_staged(&current_); });
}

void ChunkWriter::finish() {
  if (!pending_.valid()) return;
  pending_.get();  // rethrows the write's error
  current_ = StagedWrite();
}

ChunkReader::ChunkReader(SplitBuild& b) : b_(b) {
  if (!b_.streamed_.streamed() || b_.data_.is_text) return;
  stream_ = std::make_unique<ImageStream>(b_.data_, b_.streamed_);
  start(b_.plan_.next());
}

ChunkReader::~ChunkReader() {
  if (ahead_.valid()) ahead_.wait();
}

void ChunkReader::start(size_t begin) {
  ahead_begin_ = begin;
  const std::vector<int64_t>& todo = b_.plan_.todo();
  if (begin >= todo.size()) return;
  const size_t end = std::min(todo.size(), begin + b_.chunk_size());
  // todo is not changed while the chunk loop runs.
  const int64_t* positions = todo.data() + begin;
  const int64_t n = static_cast<int64_t>(end - begin);
  const int64_t item = b_.data_.item_bytes();
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

void SplitBuild::finish_split() {
  if (progress_) progress_->finish();
  writer_->finish();
}

BuildReport SplitBuild::report() const {
  BuildReport report = report_;
  report.records = manifest_.records;
  report.views = views_;
  report.skipped = report.samples * std::max<int64_t>(1, views_) - report.computed;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  report.samples_per_s = report.seconds > 0 ? report.samples / report.seconds : 0.0;
  return report;
}

void SplitBuild::set_cache_dir(const std::string& dir) {
  if (store_) throw std::logic_error("SplitBuild::set_cache_dir: the cache is open already");
  options_.cache_dir = dir;
}

void SplitBuild::use_samples_in_memory(Dataset whole) {
  if (whole.size() != data_.size() || whole.labels != data_.labels) {
    throw std::logic_error("SplitBuild::use_samples_in_memory: not the samples load_inputs loaded");
  }
  data_ = std::move(whole);
  streamed_ = StreamedImages();
  images_.reset();
}

std::vector<std::vector<int64_t>> SplitBuild::plan_batches() {
  std::vector<std::vector<int64_t>> out;
  BuildChunk chunk;
  while (next_chunk(&chunk)) {
    find_missing(&chunk);
    if (chunk.compute_pos.empty()) continue;
    std::vector<int64_t> items(chunk.compute_pos.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const int64_t view = views_ > 0 ? chunk.compute_views[i] : 0;
      items[i] = plan_.compute_item(chunk.compute_pos[i], view);
    }
    out.push_back(std::move(items));
    // Later chunks do not list these keys again (stage_write does this in one process).
    for (const Key& k : chunk.compute_keys) plan_.mark_present(k);
  }
  plan_.rewind();
  progress_.reset();
  return out;
}

void SplitBuild::ingest_and_index(const std::vector<std::string>& files, int64_t computed,
                                  int64_t bytes) {
  store_->ingest_records(files, &manifest_).throw_if_error();
  report_.computed = computed;
  report_.bytes = bytes;
  BuildChunk chunk;  // no records: index entries and counts only
  while (next_chunk(&chunk)) write_chunk(&chunk);
}

std::string SplitBuild::staging_dir() const {
  if (!store_) throw std::logic_error("SplitBuild::staging_dir: the cache is not open");
  return store_->staging_dir();
}

}  // namespace recycle
