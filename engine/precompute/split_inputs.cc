// SplitInputs (split_inputs.h): a split's dataset, keyer, views and keys, and the chunk reader.
#include "engine/precompute/split_inputs.h"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <unordered_set>

#include "base/strings.h"
#include "engine/util/parallel_loop.h"
#include "keyers/text_keyer.h"
#include "keyers/view_key.h"

namespace recycle {

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

// Keys of data's samples [0, n) into keys[offset..), in parallel.
void key_range(const Dataset& data, const Keyer& keyer, int64_t offset, std::vector<Key>* keys) {
  parallel_loop(static_cast<int64_t>(data.size()), [&](int64_t i) {
    TensorView view;
    (*keys)[offset + i] = keyer.key(data.key_input(static_cast<size_t>(i), &view));
  });
}

// Keys of the samples positions[0, n) of a split held in memory into keys[0, n), in parallel.
void key_in_memory(const Dataset& data, const Keyer& keyer, const int64_t* positions, int64_t n,
                   std::vector<Key>* keys) {
  parallel_loop(n, [&](int64_t i) {
    TensorView view;
    (*keys)[i] = keyer.key(data.key_input(static_cast<size_t>(positions[i]), &view));
  });
}

// Keys of the samples `positions` (ascending, distinct) into *keys; a streamed split is read a
// chunk at a time, then checked to its end. The samples whose file was skipped (--on-bad-file
// skip) go to *skipped (their keys are of zeros: the caller drops them).
void key_samples_at(const Dataset& data, const StreamedImages& streamed, const Keyer& keyer,
                    const std::vector<int64_t>& positions, std::vector<Key>* keys,
                    std::vector<std::pair<int64_t, std::string>>* skipped) {
  const int64_t n = static_cast<int64_t>(positions.size());
  keys->assign(positions.size(), Key{});
  skipped->clear();
  if (!streamed.streamed()) {
    key_in_memory(data, keyer, positions.data(), n, keys);
    return;
  }
  ImageStream stream(data, streamed);
  for (int64_t lo = 0; lo < n; lo += kKeyChunk) {
    const int64_t hi = std::min(n, lo + kKeyChunk);
    key_range(read_samples(data, stream, positions.data() + lo, hi - lo), keyer, lo, keys);
  }
  stream.finish();
  *skipped = stream.skipped();
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
                << " file(s) (left out: not decodable); it has no sample in this split"
                << std::endl;
    }
  }
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

// A streamed split's files are read twice: to key them, then to compute the ones with no
// record. A file that changed in between would store one image's activation under the other's
// key, forever. `read` holds what the compute pass read of the samples `positions` (distinct);
// the key of each compute row r (its sample's, or with views its view's of that sample) must be
// the chunk's compute_keys[r], or the build stops naming the sample.
void require_keyed_content(const Dataset& read, const std::vector<int64_t>& positions,
                           const BuildChunk& chunk, const Keyer& keyer, const Augment& augment,
                           int64_t views, const std::string& where) {
  std::vector<Key> now(positions.size());
  key_range(read, keyer, 0, &now);
  for (size_t r = 0; r < chunk.compute_pos.size(); ++r) {
    const size_t j = static_cast<size_t>(
        std::lower_bound(positions.begin(), positions.end(), chunk.compute_pos[r]) -
        positions.begin());
    const Key key = views > 0 ? view_key(now[j], augment.spec(), chunk.compute_views.at(r))
                              : now[j];
    if (!(key == chunk.compute_keys.at(r))) {
      throw std::runtime_error(where + ": sample " + read.ids[j] +
                               " changed while the build ran (its content is not what was keyed): "
                               "nothing of its chunk was stored; run the build again");
    }
  }
}

}  // namespace

SplitInputs::SplitInputs(const DatasetOptions& data, const std::string& keyer_spec,
                         const std::string& augment, int64_t views) {
  data_ = load_dataset(data, &streamed_);
  keyer_ = make_keyer(keyer_spec.empty() ? default_keyer_spec(data_.is_text) : keyer_spec);
  if (data_.is_text) check_model_texts(data_, *keyer_, data.spec);
  if (views > 0) {
    if (data_.is_text) {
      throw std::invalid_argument("--augment and --views apply to images; " + data.spec +
                                  " holds text");
    }
    if (data_.float_pixels || data_.item_shape.size() != 3) {
      throw std::invalid_argument("--augment needs images of uint8 pixels; " + data.spec +
                                  (data_.token_ids ? " holds token ids"
                                                   : " holds float32 inputs, which are taken "
                                                     "as they are"));
    }
    augment_ = Augment::parse(augment);
    augment_.check_image(data_.item_shape[1], data_.item_shape[2]);
    views_ = views;
  }
}

SplitInputs::SplitInputs(std::vector<IndexEntry> index, std::string description,
                         std::string classes, std::vector<std::string> class_names)
    : from_cache_(true) {
  data_.description = std::move(description);
  data_.classes = std::move(classes);
  data_.class_names = std::move(class_names);
  data_.labels.reserve(index.size());
  cache_keys_.reserve(index.size());
  for (const IndexEntry& e : index) {
    data_.labels.push_back(e.label);
    cache_keys_.push_back(e.key);
  }
}

SplitInputs::~SplitInputs() = default;

size_t SplitInputs::chunk_size(int64_t batch) const {
  const int64_t per_chunk = views_ > 0 ? batch / views_ : batch;
  return static_cast<size_t>(std::max<int64_t>(1, per_chunk));
}

std::vector<Key> SplitInputs::key_all() {
  if (from_cache_) return cache_keys_;
  std::vector<int64_t> every(data_.size());
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<int64_t>(i);
  return settle_keys(key_positions(std::move(every)));
}

SampleKeys SplitInputs::key_positions(std::vector<int64_t> positions) {
  if (from_cache_) throw std::logic_error("key_positions: another cache's split has its keys");
  SampleKeys out;
  key_samples_at(data_, streamed_, *keyer_, positions, &out.keys, &out.skipped);
  out.positions = std::move(positions);
  return out;
}

std::vector<Key> SplitInputs::settle_keys(SampleKeys whole) {
  const size_t n = data_.size();
  bool every = whole.positions.size() == n && whole.keys.size() == n;
  for (size_t i = 0; every && i < n; ++i) every = whole.positions[i] == static_cast<int64_t>(i);
  if (!every) {
    throw std::invalid_argument("settle_keys: the keys of " + std::to_string(n) +
                                " samples, in order, are needed");
  }
  std::vector<Key> keys = std::move(whole.keys);
  const auto& skipped = whole.skipped;
  if (skipped.empty()) return keys;
  // Files that could not be decoded, left out with their samples.
  report_skipped(streamed_.file, skipped);
  files_left_out_ = static_cast<int64_t>(skipped.size());
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
  return keys;
}

void SplitInputs::keep_only(const std::vector<int64_t>& positions) {
  if (from_cache_) throw std::logic_error("keep_only: another cache's split is kept whole");
  keep_samples(positions, &data_, &streamed_);
  images_.reset();  // a stream opened on the rows before
}

ImageStream& SplitInputs::own_stream() {
  if (!images_) images_ = std::make_unique<ImageStream>(data_, streamed_);
  return *images_;
}

void SplitInputs::key_samples(const BuildChunk& chunk, const int64_t* positions, int64_t n,
                              std::vector<Key>* keys) {
  if (from_cache_) throw std::logic_error("key_samples: another cache's split has its keys");
  keys->resize(static_cast<size_t>(n));
  if (!streamed_.streamed()) {
    key_in_memory(data_, *keyer_, positions, n, keys);
    return;
  }
  const std::vector<int64_t> wanted(positions, positions + n);
  key_range(samples_at(chunk, wanted), *keyer_, 0, keys);
}

Dataset SplitInputs::read_samples_of(const BuildChunk& chunk,
                                     const std::vector<int64_t>& positions) const {
  const int64_t item = data_.item_bytes();
  const auto first = chunk.pixel_pos.begin();
  const auto last = chunk.pixel_pos.end();
  Dataset out = samples_like(data_);
  out.pixels.resize(positions.size() * static_cast<size_t>(item));
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t pos = positions[i];
    const auto at = std::lower_bound(first, last, pos);
    if (at == last || *at != pos) {
      throw std::logic_error("a chunk computes a sample outside its range");
    }
    std::memcpy(out.pixels.data() + i * item, chunk.pixels.data() + (at - first) * item,
                static_cast<size_t>(item));
    out.labels.push_back(data_.labels[pos]);
    out.ids.push_back(data_.ids[pos]);
  }
  return out;
}

Dataset SplitInputs::samples_at(const BuildChunk& chunk, const std::vector<int64_t>& positions) {
  if (streamed_.streamed() && !chunk.pixels.empty()) return read_samples_of(chunk, positions);
  if (streamed_.streamed()) {
    ImageStream& stream = own_stream();
    Dataset read = read_samples(data_, stream, positions.data(),
                                static_cast<int64_t>(positions.size()));
    require_no_skips(stream);
    return read;
  }
  Dataset out = samples_like(data_);
  const int64_t item = data_.item_bytes();
  out.pixels.resize(positions.size() * static_cast<size_t>(item));
  for (size_t i = 0; i < positions.size(); ++i) {
    std::memcpy(out.pixels.data() + i * item, data_.item_pixels(positions[i]),
                static_cast<size_t>(item));
    out.labels.push_back(data_.labels[positions[i]]);
    out.ids.push_back(data_.ids[positions[i]]);
  }
  return out;
}

const Dataset& SplitInputs::compute_images(const BuildChunk& chunk, Dataset* read,
                                           std::vector<int64_t>* rows) {
  const std::vector<int64_t>& pos = chunk.compute_pos;
  const int64_t m = static_cast<int64_t>(pos.size());
  if (!streamed_.streamed() && views_ == 0) {
    *rows = pos;
    return data_;
  }
  std::vector<int64_t> distinct(pos);  // in todo order (views inner): ascending
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (!std::is_sorted(distinct.begin(), distinct.end())) {
    throw std::logic_error("compute_images: a chunk's positions are not in order");
  }
  Dataset base = samples_at(chunk, distinct);
  if (streamed_.streamed()) {
    require_keyed_content(base, distinct, chunk, *keyer_, augment_, views_, streamed_.file);
  }
  rows->resize(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r) (*rows)[r] = r;
  if (views_ == 0) {
    *read = std::move(base);  // distinct == pos: positions repeat only with views
    return *read;
  }
  *read = samples_like(data_);
  const int64_t item = data_.item_bytes();
  read->pixels.resize(static_cast<size_t>(m * item));
  const std::vector<int64_t>& shape = data_.item_shape;
  parallel_loop(m, [&](int64_t r) {
    const size_t j = static_cast<size_t>(
        std::lower_bound(distinct.begin(), distinct.end(), pos[r]) - distinct.begin());
    uint8_t* px = read->pixels.data() + r * item;
    std::memcpy(px, base.pixels.data() + j * item, static_cast<size_t>(item));
    augment_.apply(px, shape[0], shape[1], shape[2], view_seed(chunk.compute_keys[r]));
  });
  for (int64_t r = 0; r < m; ++r) {
    read->labels.push_back(data_.labels[pos[r]]);
    read->ids.push_back(data_.ids[pos[r]]);
  }
  return *read;
}

std::vector<std::string> SplitInputs::compute_texts(const BuildChunk& chunk) const {
  std::vector<std::string> texts(chunk.compute_pos.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    texts[i] = model_text(*keyer_, data_.texts[chunk.compute_pos[i]]);
  }
  return texts;
}

void SplitInputs::adopt_class_names(const std::vector<std::string>& names,
                                    const std::string& split, const std::string& where) {
  recycle::adopt_class_names(&data_, names, split, where);
}

void SplitInputs::use_samples_in_memory(Dataset whole) {
  if (whole.size() != data_.size() || whole.labels != data_.labels) {
    throw std::logic_error("use_samples_in_memory: not the samples these inputs loaded");
  }
  data_ = std::move(whole);
  streamed_ = StreamedImages();
  images_.reset();
}

ChunkReader::ChunkReader(const SplitInputs& inputs, const std::vector<int64_t>& todo,
                         size_t first, size_t chunk_size)
    : inputs_(inputs), todo_(todo), chunk_size_(chunk_size) {
  if (!inputs_.streamed().streamed() || inputs_.data().is_text) return;
  stream_ = std::make_unique<ImageStream>(inputs_.data(), inputs_.streamed());
  start(first);
}

ChunkReader::~ChunkReader() {
  if (ahead_.valid()) ahead_.wait();
}

void ChunkReader::start(size_t begin) {
  ahead_begin_ = begin;
  if (begin >= todo_.size()) return;
  const size_t end = std::min(todo_.size(), begin + chunk_size_);
  const int64_t* positions = todo_.data() + begin;
  const int64_t n = static_cast<int64_t>(end - begin);
  const int64_t item = inputs_.data().item_bytes();
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
    throw std::logic_error("ChunkReader::read: chunks must come in order");
  }
  chunk->pixels = ahead_.get();  // rethrows the read's error
  chunk->pixel_pos.assign(todo_.begin() + static_cast<std::ptrdiff_t>(chunk->begin),
                          todo_.begin() + static_cast<std::ptrdiff_t>(chunk->end));
  start(chunk->end);
}

}  // namespace recycle
