// include/recycle/reader.h: SplitReader and CacheLoader over CachedBatches (random access to a
// cached split), PrefetchedBatches (decoded ahead on a background thread) and Sampler;
// KeyedReader over the cache's keyer (engine/jobs/tensor_keys.h) and one MultiGet a batch.
#include "recycle/reader.h"

#include <torch/torch.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "cache/activation_store.h"
#include "cache/open_existing.h"
#include "cache/record.h"
#include "cache/record_layout.h"
#include "engine/data/sampler.h"
#include "engine/jobs/tensor_keys.h"
#include "engine/models/device.h"
#include "engine/train/batch_sources.h"
#include "engine/train/prefetch.h"
#include "recycle/errors.h"
#include "recycle/keyer.h"

namespace recycle {

namespace {

// The store at `o.cache_dir`, opened read-only with a block cache of `o.block_cache_mb` MiB, and
// its manifest; the options checked first.
void open_read_only(const ReaderOptions& o, std::unique_ptr<ActivationStore>* store,
                    Manifest* manifest) {
  o.validate();
  *store = open_cache_for_read(o.cache_dir, manifest, static_cast<size_t>(o.block_cache_mb) << 20);
}

// The store, its manifest and the split's index, checked: what the split readers start from.
struct OpenSplit {
  std::unique_ptr<ActivationStore> store;
  Manifest manifest;
  std::string manifest_json;
  std::vector<IndexEntry> index;
  bool complete = false;

  explicit OpenSplit(const ReaderOptions& o) {
    open_read_only(o, &store, &manifest);
    const SplitInfo& info =
        require_split(*store, manifest, o.split, o.allow_partial, "allow_partial");
    complete = info.complete;
    store->read_split_index(o.split, info, &index).throw_if_error();
    manifest_json = manifest.to_json_string();
  }
};

std::vector<std::string> names_of(const Manifest& m) {
  std::vector<std::string> names;
  for (const TensorLayout& t : m.layout()) names.push_back(t.name);
  return names;
}

// A batch's tensors in layout order, handed out (shared, not copied).
void hand_out(const Batch& batch, const Manifest& m, std::vector<at::Tensor>* tensors,
              at::Tensor* labels) {
  tensors->clear();
  for (const TensorLayout& t : m.layout()) tensors->push_back(batch.at(t.name));
  *labels = batch.labels;
}

}  // namespace

struct SplitReader::Impl {
  OpenSplit open;
  CachedBatches batches;
  std::vector<int64_t> labels;
  std::mutex mu;

  explicit Impl(const ReaderOptions& o)
      : open(o), batches(*open.store, open.manifest, o.split, torch::kCPU) {
    labels.reserve(open.index.size());
    for (const IndexEntry& e : open.index) labels.push_back(e.label);
  }
};

SplitReader::SplitReader(const ReaderOptions& options) : impl_(std::make_unique<Impl>(options)) {}
SplitReader::~SplitReader() = default;

int64_t SplitReader::size() const { return impl_->batches.size(); }
std::vector<std::string> SplitReader::tensor_names() const {
  return names_of(impl_->open.manifest);
}
std::string SplitReader::manifest_json() const { return impl_->open.manifest_json; }
const std::vector<int64_t>& SplitReader::labels() const { return impl_->labels; }
bool SplitReader::complete() const { return impl_->open.complete; }

void SplitReader::read(const int64_t* positions, int64_t n, std::vector<at::Tensor>* tensors,
                       at::Tensor* labels) {
  const int64_t size = this->size();
  if (n < 0) throw InvalidArgument("a negative number of samples to read");
  for (int64_t i = 0; i < n; ++i) {
    if (positions[i] < 0 || positions[i] >= size) {
      throw std::out_of_range("sample " + std::to_string(positions[i]) +
                              " is outside the split's " + std::to_string(size) + " samples");
    }
  }
  Batch batch;  // fresh tensors: the caller keeps them
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->batches.load(positions, n, &batch);
  }
  hand_out(batch, impl_->open.manifest, tensors, labels);
}

namespace {

// Each sample's length: the first varying dimension of its record (records as long as the text),
// read in MultiGets of 1,024 records, each record's header parsed, nothing decoded.
// InvalidArgument for a split whose records are all of one shape.
std::vector<int64_t> record_lengths(const OpenSplit& open, const std::string& dir,
                                    const std::string& split) {
  const RecordLayout layout = open.manifest.layout();
  size_t which = layout.size(), dim = 0;
  for (size_t j = 0; j < layout.size() && which == layout.size(); ++j) {
    for (size_t d = 0; d < layout[j].shape.size(); ++d) {
      if (layout[j].shape[d] == kVariableDim) {
        which = j;
        dim = d;
        break;
      }
    }
  }
  if (which == layout.size()) {
    throw InvalidArgument("group_by_length: the records of split " + split + " of cache " + dir +
                          " are all of one shape: there is no length to group them by");
  }
  std::vector<Key> keys;
  keys.reserve(open.index.size());
  for (const IndexEntry& e : open.index) keys.push_back(e.key);
  std::vector<int64_t> lengths(keys.size(), 0);
  std::vector<RecordTensor> parsed;
  std::vector<Status> statuses;
  std::string error;
  constexpr size_t kChunk = 1024;
  for (size_t begin = 0; begin < keys.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, keys.size() - begin);
    open.store->multi_get(
        keys.data() + begin, n,
        [&](size_t k, std::string_view bytes) {
          if (!error.empty()) return;
          Status st = parse_record(bytes, &parsed);
          if (st.ok()) st = check_record_layout(parsed, layout);
          if (!st.ok()) {
            error = "record " + keys[begin + k].to_hex() + ": " + st.to_string();
            return;
          }
          lengths[begin + k] = parsed[which].shape[dim];
        },
        &statuses);
    throw_if_part_failed(dir, error, statuses, keys.data() + begin);
  }
  return lengths;
}

}  // namespace

struct CacheLoader::Impl {
  LoaderOptions o;
  OpenSplit open;
  CachedBatches cached;
  std::unique_ptr<PrefetchedBatches> ahead;  // declared after `cached`: destroyed first
  Sampler sampler;
  std::vector<int64_t> lengths;  // group_by_length's: each sample's
  std::vector<int64_t> order;
  size_t next = 0;
  bool started = false;
  Batch current;

  explicit Impl(const LoaderOptions& options)
      : o(checked(options)),
        open(options.reader),
        cached(*open.store, open.manifest, options.reader.split,
               usable_device(options.device, "device")),
        sampler(check(options, static_cast<int64_t>(open.index.size())), options.shuffle,
                options.seed, options.rank, options.world_size) {
    // A split of K augmented views: each epoch reads one view of every sample, as recycle-train
    // does (Sampler::set_draws; K epochs give each view once).
    sampler.set_draws(open.manifest.splits.at(options.reader.split).views);
    if (o.epoch_samples > 0) sampler.set_epoch_samples(o.epoch_samples);
    if (o.group_by_length) {
      lengths = record_lengths(open, options.reader.cache_dir, options.reader.split);
    }
    // One loading thread either way. Split across ATen's threads on the calling thread (what
    // recycle-train does with --prefetch 0), an epoch took 2.7 to 4.8 times as long inside
    // Debian's Python torch process as on one thread (docs/python.md, "Measured").
    cached.set_load_threads(1);
    if (o.pin_memory) {
      try {
        cached.set_pinned(true);
      } catch (const std::invalid_argument& e) {
        throw InvalidArgument(std::string("pin_memory: ") + e.what());
      }
    }
    if (o.prefetch > 0) {
      ahead = std::make_unique<PrefetchedBatches>(cached, o.prefetch, cached.device());
    }
  }

  static const LoaderOptions& checked(const LoaderOptions& o) {
    o.validate();
    return o;
  }

  // What the options need of the split (validate() checked them alone).
  static int64_t check(const LoaderOptions& o, int64_t size) {
    if (size < o.world_size) {
      throw InvalidArgument("split of " + std::to_string(size) + " samples cannot be shared by " +
                            std::to_string(o.world_size) + " ranks");
    }
    return size;
  }

  BatchSource& source() { return ahead ? static_cast<BatchSource&>(*ahead) : cached; }

  void start(int64_t epoch, int64_t first_batch = 0) {
    order = sampler.epoch_order(epoch);
    if (o.group_by_length) order = grouped_by_length(order, lengths, o.batch_size);
    if (o.drop_last) {
      order.resize(order.size() - order.size() % static_cast<size_t>(o.batch_size));
    }
    // A resumed epoch: its batches are consecutive runs of the order, so the ones after
    // first_batch are what is left once the runs before it are dropped.
    const size_t batch = static_cast<size_t>(o.batch_size);
    const size_t skipped = std::min(order.size(), static_cast<size_t>(first_batch) * batch);
    order.erase(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(skipped));
    source().plan(order, o.batch_size);
    next = 0;
    started = true;
  }
};

CacheLoader::CacheLoader(const LoaderOptions& options) : impl_(std::make_unique<Impl>(options)) {}
CacheLoader::~CacheLoader() = default;

int64_t CacheLoader::size() const { return impl_->cached.size(); }
int64_t CacheLoader::samples_per_rank() const { return impl_->sampler.samples_per_rank(); }
int64_t CacheLoader::batches() const {
  const int64_t n = samples_per_rank(), b = impl_->o.batch_size;
  return impl_->o.drop_last ? n / b : (n + b - 1) / b;
}
std::vector<std::string> CacheLoader::tensor_names() const {
  return names_of(impl_->open.manifest);
}
std::string CacheLoader::manifest_json() const { return impl_->open.manifest_json; }

void CacheLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  if (epoch < 0) throw InvalidArgument("epoch must be 0 or more, not " + std::to_string(epoch));
  if (first_batch < 0 || first_batch > batches()) {
    throw InvalidArgument("first_batch must be 0 to the epoch's " + std::to_string(batches()) +
                          " batches, not " + std::to_string(first_batch));
  }
  impl_->start(epoch, first_batch);
}

bool CacheLoader::next(std::vector<at::Tensor>* tensors, at::Tensor* labels) {
  Impl& s = *impl_;
  if (!s.started) s.start(0);
  if (s.next >= s.order.size()) return false;
  const int64_t n =
      std::min<int64_t>(s.o.batch_size, static_cast<int64_t>(s.order.size() - s.next));
  s.source().load(s.order.data() + s.next, n, &s.current);
  s.next += static_cast<size_t>(n);
  hand_out(s.current, s.open.manifest, tensors, labels);
  return true;
}

struct KeyedReader::Impl {
  std::string dir;
  std::unique_ptr<ActivationStore> store;
  Manifest manifest;
  std::string manifest_json;
  RecordLayout layout;
  bool variable = false;  // some record dimension varies (records as long as the text)
  std::unique_ptr<Keyer> keyer;
  std::mutex mu;

  // The records of `keys` decoded into (*tensors)[j] [n, ...] (a variable layout's padded to
  // the longest hit), the misses' rows zero; *hits bool [n].
  void fetch(const std::vector<Key>& keys, std::vector<at::Tensor>* tensors, at::Tensor* hits);
};

void KeyedReader::Impl::fetch(const std::vector<Key>& keys, std::vector<at::Tensor>* tensors,
                              at::Tensor* hits_out) {
  const int64_t n = static_cast<int64_t>(keys.size());
  std::vector<torch::Tensor> out;
  std::vector<int64_t> row_bytes;
  std::vector<std::vector<torch::Tensor>> per_sample(layout.size());  // a variable layout's
  for (const TensorLayout& t : layout) {
    if (variable) {
      // A miss's row: one position of zeros, so that it pads as an empty record would.
      std::vector<int64_t> one(t.shape);
      for (int64_t& d : one) d = d == kVariableDim ? 1 : d;
      per_sample[out.size()].assign(static_cast<size_t>(n),
                                    torch::zeros(one, torch_dtype(t.dtype)));
      out.emplace_back();
      row_bytes.push_back(0);
      continue;
    }
    std::vector<int64_t> shape = {n};
    shape.insert(shape.end(), t.shape.begin(), t.shape.end());
    out.push_back(torch::zeros(shape, torch_dtype(t.dtype)));
    row_bytes.push_back(n > 0 ? static_cast<int64_t>(out.back().nbytes()) / n : 0);
  }
  torch::Tensor hits = torch::zeros({n}, torch::kBool);
  bool* hit = hits.data_ptr<bool>();
  std::vector<Status> statuses;
  std::vector<RecordTensor> parsed;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mu);
    store->multi_get(
        keys,
        [&](size_t i, std::string_view bytes) {
          if (!error.empty()) return;
          Status st = parse_record(bytes, &parsed);
          if (st.ok()) st = check_record_layout(parsed, layout);
          if (!st.ok()) {
            error = "record " + keys[i].to_hex() + ": " + st.to_string();
            return;
          }
          for (size_t j = 0; j < parsed.size(); ++j) {
            if (variable) {
              per_sample[j][i] = torch::empty(parsed[j].shape, torch_dtype(parsed[j].dtype));
              decode_into(parsed[j], per_sample[j][i].data_ptr());
            } else {
              decode_into(parsed[j], static_cast<char*>(out[j].data_ptr()) +
                                         static_cast<int64_t>(i) * row_bytes[j]);
            }
          }
          hit[i] = true;
        },
        &statuses);
  }
  if (!error.empty()) throw CorruptRecordError("corrupt cache " + dir + ": " + error);
  for (const Status& st : statuses) {
    if (st.ok() || st.is_not_found()) continue;
    if (st.is_corruption()) throw CorruptRecordError("cache " + dir + ": " + st.to_string());
    throw std::runtime_error("cache " + dir + ": " + st.to_string());
  }
  if (variable) {
    for (size_t j = 0; j < layout.size(); ++j) {
      out[j] = pad_and_stack(per_sample[j], torch_dtype(layout[j].dtype));
    }
  }
  tensors->assign(out.begin(), out.end());
  *hits_out = hits;
}

KeyedReader::KeyedReader(const std::string& cache_dir, int64_t block_cache_mb)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dir = cache_dir;
  ReaderOptions ro;
  ro.cache_dir = cache_dir;
  ro.block_cache_mb = block_cache_mb;
  open_read_only(ro, &m.store, &m.manifest);
  m.manifest_json = m.manifest.to_json_string();
  m.layout = m.manifest.layout();
  if (m.layout.empty()) throw std::runtime_error("cache " + cache_dir + " has no record layout");
  for (const TensorLayout& t : m.layout) {
    for (int64_t d : t.shape) m.variable = m.variable || d == kVariableDim;
  }
  m.keyer = make_keyer(m.manifest.keyer);
  // A keyer that needs more than an input's bytes or text (an id) cannot find a record by
  // content.
  const uint8_t probe = 0;
  TensorView view;
  view.dtype = "uint8";
  view.shape = {1};
  view.strides = {1};
  view.data = &probe;
  view.element_size = 1;
  KeyInput in;
  in.tensor = &view;
  in.has_text = true;  // empty
  try {
    m.keyer->key(in);
  } catch (const std::invalid_argument&) {
    throw InvalidArgument("cache " + cache_dir + " is keyed by '" + m.keyer->spec() +
                          "', not by content: its records cannot be looked up from inputs");
  }
}

KeyedReader::~KeyedReader() = default;

std::vector<std::string> KeyedReader::tensor_names() const { return names_of(impl_->manifest); }
std::string KeyedReader::manifest_json() const { return impl_->manifest_json; }

void KeyedReader::lookup(const at::Tensor& inputs_in, std::vector<at::Tensor>* tensors,
                         at::Tensor* hits_out) {
  Impl& m = *impl_;
  if (inputs_in.dim() < 1) throw InvalidArgument("inputs must have the batch as dimension 0");
  if (m.variable) {
    throw InvalidArgument("cache " + m.dir +
                          " holds records as long as the text: it was built "
                          "from texts or named tensors, which are looked up as such, not as a "
                          "tensor");
  }
  const torch::Tensor inputs = inputs_in.detach().to(torch::kCPU).contiguous();
  const std::vector<int64_t> row_shape = inputs.sizes().slice(1).vec();
  const std::vector<int64_t>& want = m.manifest.input_shape;
  if (!want.empty() && row_shape != want) {
    throw InvalidArgument("inputs of shape " + shape_string(row_shape) + " per sample, cache " +
                          m.dir + " was built from " + shape_string(want));
  }
  std::vector<Key> keys;
  key_rows(*m.keyer, inputs, 0, &keys);
  m.fetch(keys, tensors, hits_out);
}

void KeyedReader::lookup_texts(const std::vector<std::string>& texts,
                               std::vector<at::Tensor>* tensors, at::Tensor* hits) {
  std::vector<Key> keys;
  key_texts(*impl_->keyer, texts, 0, &keys);
  impl_->fetch(keys, tensors, hits);
}

void KeyedReader::lookup_named(const std::vector<std::map<std::string, at::Tensor>>& samples,
                               std::vector<at::Tensor>* tensors, at::Tensor* hits) {
  std::vector<Key> keys;
  key_named(*impl_->keyer, samples, 0, &keys);
  impl_->fetch(keys, tensors, hits);
}

}  // namespace recycle
