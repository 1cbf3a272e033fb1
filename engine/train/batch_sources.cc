#include "engine/train/batch_sources.h"

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <numeric>
#include <stdexcept>

#include "cache/read_pool.h"
#include "cache/store_options.h"
#include "cache/record.h"
#include "cache/record_layout.h"
#include "engine/models/preprocess.h"
#include "engine/train/compact_batch.h"
#include "engine/train/memory_budget.h"  // decoded_sample_bytes
#include "keyers/view_key.h"
#include "recycle/errors.h"

namespace recycle {

CachedBatches::CachedBatches(const ActivationStore& store, const Manifest& manifest,
                             const std::string& split, const torch::Device& device,
                             c10::MemoryFormat format)
    : store_(store), split_name_(split), device_(device), format_(format) {
  const auto info = manifest.splits.find(split);
  if (info == manifest.splits.end()) {
    throw std::runtime_error("cache " + store.dir() + " has no split '" + split + "'");
  }
  // A complete split whose index count differs from its manifest is refused, never trained
  // on in part.
  split_ = info->second;
  const Status st = store.read_split_index(split, info->second, &entries_);
  st.throw_if_error();
  if (entries_.empty()) throw std::runtime_error("cache split " + split + " has no samples");
  layout_ = manifest.layout();
  if (layout_.empty()) throw std::runtime_error("cache " + store.dir() + " has no record layout");
  for (const TensorLayout& t : layout_) {
    for (int64_t d : t.shape) variable_ = variable_ || d == kVariableDim;
  }
  device_decode_ = device.is_cuda();
  for (const IndexEntry& e : entries_) {
    if (e.label < 0 || e.label >= static_cast<int64_t>(manifest.class_names.size())) {
      throw std::runtime_error("cache split " + split + " has label " + std::to_string(e.label) +
                               " outside its " + std::to_string(manifest.class_names.size()) +
                               " classes");
    }
  }
}

torch::ScalarType torch_dtype(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
      return torch::kFloat32;
    case Dtype::kInt64:
      return torch::kInt64;
    case Dtype::kInt32:
      return torch::kInt32;
    case Dtype::kUint8:
      return torch::kUInt8;
    case Dtype::kBool:
      return torch::kBool;
  }
  throw std::invalid_argument("unknown dtype");
}

void decode_into(const RecordTensor& t, void* out) {
  if (t.dtype == Dtype::kFloat32) {
    decode_tensor(t, static_cast<float*>(out));
  } else {
    decode_exact(t, out);
  }
}

torch::Tensor pad_and_stack(const std::vector<torch::Tensor>& samples, torch::ScalarType dtype) {
  if (samples.empty()) return torch::empty({0}, dtype);
  std::vector<int64_t> shape = samples.front().sizes().vec();
  for (const torch::Tensor& t : samples) {
    for (size_t d = 0; d < shape.size(); ++d) {
      shape[d] = std::max(shape[d], t.size(static_cast<int64_t>(d)));
    }
  }
  shape.insert(shape.begin(), static_cast<int64_t>(samples.size()));
  torch::Tensor out = torch::zeros(shape, dtype);
  for (size_t i = 0; i < samples.size(); ++i) {
    torch::Tensor row = out[static_cast<int64_t>(i)];
    for (int64_t d = 0; d < samples[i].dim(); ++d) row = row.narrow(d, 0, samples[i].size(d));
    row.copy_(samples[i]);
  }
  return out;
}

namespace {

// Channels [c0, c1) and pixels [p0, p1) of a [C, HW] sample into its [HW, C] place, 16 pixels
// at a time so that the strided writes of a block stay in the L1 cache.
void transpose_block(const float* chw, int64_t c, int64_t hw, float* hwc, int64_t c0, int64_t c1,
                     int64_t p0, int64_t p1) {
  constexpr int64_t kBlock = 16;
  for (int64_t b = p0; b < p1; b += kBlock) {
    const int64_t end = std::min(p1, b + kBlock);
    for (int64_t ch = c0; ch < c1; ++ch) {
      const float* from = chw + ch * hw;
      for (int64_t p = b; p < end; ++p) hwc[p * c + ch] = from[p];
    }
  }
}

// Channels [0, c8) and pixels [0, p8), both multiples of 8, in 8x8 tiles transposed in AVX
// registers (the usual unpack, shuffle, permute sequence).
__attribute__((target("avx"))) void transpose_avx(const float* chw, int64_t c, int64_t hw,
                                                  float* hwc, int64_t c8, int64_t p8) {
  for (int64_t p = 0; p < p8; p += 8) {
    for (int64_t ch = 0; ch < c8; ch += 8) {
      const float* s = chw + ch * hw + p;
      __m256 r[8], t[8], u[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(s + k * hw);
      for (int k = 0; k < 4; ++k) {
        t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
      }
      for (int k = 0; k < 2; ++k) {
        u[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      float* d = hwc + p * c + ch;
      for (int k = 0; k < 4; ++k) {
        _mm256_storeu_ps(d + k * c, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
        _mm256_storeu_ps(d + (k + 4) * c, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
      }
    }
  }
}

// [C, H, W] values into [H, W, C] order: one sample of a channels-last batch. Writing each
// channel across the whole sample took a third of a warm epoch's time on 64x28x28 records
// (docs/scale.md); 8x8 tiles in AVX registers where the CPU has AVX, the rest in blocks.
void to_channels_last(const float* chw, int64_t c, int64_t hw, float* hwc) {
  static const bool avx = __builtin_cpu_supports("avx");
  const int64_t c8 = avx ? c - c % 8 : 0, p8 = avx ? hw - hw % 8 : 0;
  if (c8 > 0 && p8 > 0) {
    transpose_avx(chw, c, hw, hwc, c8, p8);
    transpose_block(chw, c, hw, hwc, 0, c8, p8, hw);  // the pixels after the last tile
    transpose_block(chw, c, hw, hwc, c8, c, 0, hw);   // the channels after the last tile
  } else {
    transpose_block(chw, c, hw, hwc, 0, c, 0, hw);
  }
}

const torch::Tensor* find_input(const Batch& b, const std::string& name) {
  for (const auto& [n, t] : b.inputs) {
    if (n == name) return &t;
  }
  return nullptr;
}

}  // namespace

std::string CachedBatches::explain_non_finite(int64_t index) const {
  const int64_t size = static_cast<int64_t>(entries_.size());
  if (index < 0 || index >= size * std::max<int64_t>(1, split_.views)) {
    return BatchSource::explain_non_finite(index);
  }
  const IndexEntry& e = entries_[index % size];
  const int64_t view = index / size;
  const Key key = split_.views > 0 ? view_key(e.key, split_.augment, view) : e.key;
  return "sample " + std::to_string(index % size) +
         (split_.views > 0 ? " (view " + std::to_string(view) + ")" : "") + " of split '" +
         split_name_ + "' (record " + key.to_hex() + ") of cache " + store_.dir() +
         ", which holds values that are not finite: a version of recycle that did not refuse "
         "them built it; rebuild it (recycle-inspect --verify names every such record)";
}

bool CachedBatches::channels_last(size_t j) const {
  return format_ == c10::MemoryFormat::ChannelsLast && !variable_ &&
         layout_[j].dtype == Dtype::kFloat32 && layout_[j].shape.size() == 3;
}

bool CachedBatches::compact(size_t j) const {
  return device_decode_ && !variable_ && layout_[j].dtype == Dtype::kFloat32 &&
         is_compact_codec(layout_[j].codec);
}

void CachedBatches::set_pinned(bool pinned) {
  if (pinned && !torch::cuda::is_available()) {
    throw std::invalid_argument(
        "pinned host memory needs a GPU, and this process has none (a "
        "LibTorch without CUDA, or no GPU visible)");
  }
  pinned_ = pinned;
}

namespace {

// The keys (views' keys on a split of views) and labels of samples indices[0, n) of a split of
// `entries`; throws std::out_of_range on an index outside it.
void look_up_samples(const std::vector<IndexEntry>& entries, const SplitInfo& split,
                     const int64_t* indices, int64_t n, Key* keys, int64_t* labels) {
  const int64_t size = static_cast<int64_t>(entries.size());
  const int64_t views = std::max<int64_t>(1, split.views);
  for (int64_t i = 0; i < n; ++i) {
    if (indices[i] < 0 || indices[i] >= size * views) {
      throw std::out_of_range("sample index " + std::to_string(indices[i]) +
                              " is outside a split of " + std::to_string(size) + " samples" +
                              (split.views > 0 ? " of " + std::to_string(views) + " views" : ""));
    }
    const IndexEntry& e = entries[indices[i] % size];
    keys[i] = split.views > 0 ? view_key(e.key, split.augment, indices[i] / size) : e.key;
    labels[i] = e.label;
  }
}

// A fixed layout tensor's [n, ...] rows of a batch: `had` (what the last batch held) when it
// fits, else new ones.
torch::Tensor batch_rows(const TensorLayout& layout, int64_t n, const torch::Tensor* had,
                         bool pinned, c10::MemoryFormat format) {
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), layout.shape.begin(), layout.shape.end());
  return reuse_or_empty(had, shape, torch::dtype(torch_dtype(layout.dtype)).pinned_memory(pinned),
                        format);
}

// One record's tensor decoded into row i (of `row_bytes`) of `rows`; in [H, W, C] order through
// `sample` (scratch) when `chw` (its [C, H, W] shape) is given: a channels-last batch.
void decode_row(const RecordTensor& rt, const torch::Tensor& rows, int64_t i, int64_t row_bytes,
                const std::vector<int64_t>* chw, std::vector<float>* sample) {
  char* row = static_cast<char*>(rows.data_ptr()) + i * row_bytes;
  if (chw == nullptr) {
    decode_into(rt, row);
    return;
  }
  const std::vector<int64_t>& s = *chw;
  sample->resize(static_cast<size_t>(s[0] * s[1] * s[2]));
  decode_tensor(rt, sample->data());
  to_channels_last(sample->data(), s[0], s[1] * s[2], reinterpret_cast<float*>(row));
}

// One record's tensor of a variable layout, decoded into a tensor of its own.
torch::Tensor decode_sample(const RecordTensor& rt) {
  torch::Tensor t = torch::empty(rt.shape, torch_dtype(rt.dtype));
  decode_into(rt, t.data_ptr());
  return t;
}

// Splits samples [0, n) into parts of at least 8 samples, up to `threads` of them, and runs
// load_part(parts[p], begin, end) on each, in ATen's team when there are several. Returns the
// count of parts (part p begins at n * p / count); `parts` grows to it.
template <typename Part, typename LoadPart>
int64_t load_in_parts(int64_t n, int64_t threads, std::vector<Part>* parts,
                      const LoadPart& load_part) {
  const int64_t count = std::clamp<int64_t>(n / 8, 1, threads);
  if (static_cast<int64_t>(parts->size()) < count) parts->resize(static_cast<size_t>(count));
  auto bound = [&](int64_t p) { return n * p / count; };
  if (count == 1) {
    load_part((*parts)[0], 0, n);
  } else {
    at::parallel_for(0, count, 1, [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p) load_part((*parts)[p], bound(p), bound(p + 1));
    });
  }
  return count;
}

// The threads of load_on_read_threads: as many as a store reads with (StoreOptions'
// default, or RECYCLE_READ_THREADS, which the store's open has refused when it is not valid),
// started at the first use and never stopped (a loading thread may still use them while the
// process exits).
ReadPool& read_threads() {
  static ReadPool* const pool = new ReadPool([] {
    int threads = StoreOptions().read_threads;
    (void)read_threads_from_environment(&threads);  // a bad value: the store's open said so
    return threads;
  }());
  return *pool;
}

// load_in_parts for a source loaded by one thread (a background loader's): the parts, of at
// least 8 samples and 256 KB of decoded values (`sample_bytes` a sample; fewer bytes are not
// worth a thread's wake-up), are read and decoded by the read threads, so that some parts'
// reads wait on the disk while others decode (one thread read a batch, then decoded it: a cold
// epoch of recycle.CachedLoader read 245-337 MB/s of a disk that reads 430 MB/s in order).
template <typename Part, typename LoadPart>
int64_t load_on_read_threads(int64_t n, int64_t sample_bytes, std::vector<Part>* parts,
                             const LoadPart& load_part) {
  ReadPool& pool = read_threads();
  constexpr int64_t kPartBytes = 256 << 10;
  const int64_t count = std::clamp<int64_t>(
      std::min(n / 8, n * sample_bytes / kPartBytes), 1, pool.threads());
  if (static_cast<int64_t>(parts->size()) < count) parts->resize(static_cast<size_t>(count));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(count));  // a task must not throw
  pool.run(static_cast<int>(count), [&](int p) {
    try {
      load_part((*parts)[p], n * p / count, n * (p + 1) / count);
    } catch (...) {
      errors[static_cast<size_t>(p)] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return count;
}

}  // namespace

void throw_if_part_failed(const std::string& dir, const std::string& error,
                          const std::vector<Status>& statuses, const Key* keys) {
  if (!error.empty()) throw CorruptRecordError("corrupt cache " + dir + ": " + error);
  for (size_t k = 0; k < statuses.size(); ++k) {
    if (statuses[k].is_not_found()) {
      throw CorruptRecordError("corrupt cache " + dir + ": the samples index points to " +
                               keys[k].to_hex() + ", which has no record (recycle-inspect --cache " +
                               dir + " --verify notes every such record, and a rerun of the "
                               "build of its split then computes them)");
    }
    if (statuses[k].is_corruption()) {  // a block that failed its checksum
      throw CorruptRecordError("cache " + dir + ": " + statuses[k].to_string() +
                               " (recycle-inspect --cache " + dir + " --verify notes every "
                               "damaged record, and a rerun of the build then computes them "
                               "again)");
    }
    if (!statuses[k].ok()) {
      throw std::runtime_error("cache " + dir + ": " + statuses[k].to_string());
    }
  }
}

namespace {

// `t` on `device`: itself on the CPU, else copied (asynchronously from pinned memory).
torch::Tensor on_device(const torch::Tensor& t, const torch::Device& device) {
  return device.is_cpu() ? t : t.to(device, /*non_blocking=*/t.is_pinned());
}

}  // namespace

void CachedBatches::load(const int64_t* indices, int64_t n, Batch* out) {
  // Fixed layouts decode straight into the batch's tensors (those `out` holds when nothing
  // else refers to them, on the CPU in pageable memory: a pinned block is the allocator's to
  // reuse); variable ones per sample.
  std::vector<torch::Tensor> fixed;
  std::vector<CompactTensor> compacts(layout_.size());  // compact(j): the codes, else unused
  std::vector<std::vector<torch::Tensor>> per_sample(layout_.size());
  std::vector<int64_t> row_bytes(layout_.size(), 0);
  const bool pinned = pinned_ || device_.is_cuda();
  const bool reuse = device_.is_cpu() && !pinned;  // decode into what `out` holds
  for (size_t j = 0; j < layout_.size(); ++j) {
    if (variable_) {
      per_sample[j].resize(static_cast<size_t>(n));
      continue;
    }
    if (compact(j)) {
      compacts[j] = make_compact(layout_[j].codec, layout_[j].shape, n, pinned);
      fixed.emplace_back();
      continue;
    }
    const torch::Tensor* had = reuse ? find_input(*out, layout_[j].name) : nullptr;
    fixed.push_back(batch_rows(layout_[j], n, had, pinned,
                               channels_last(j) ? format_ : c10::MemoryFormat::Contiguous));
    row_bytes[j] = n > 0 ? static_cast<int64_t>(fixed.back().nbytes()) / n : 0;
  }
  torch::Tensor y = reuse_or_empty(reuse ? &out->labels : nullptr, {n},
                                   torch::dtype(torch::kInt64).pinned_memory(pinned));
  out->clear();  // drops the references `fixed` and `y` took over
  keys_.resize(static_cast<size_t>(n));
  look_up_samples(entries_, split_, indices, n, keys_.data(), y.data_ptr<int64_t>());
  // Samples [begin, end) of the batch: read with one MultiGet, decoded into their rows.
  auto load_part = [&](Part& part, int64_t begin, int64_t end) {
    part.error.clear();
    store_.multi_get(
        keys_.data() + begin, static_cast<size_t>(end - begin),
        [&](size_t k, std::string_view bytes) {
          if (!part.error.empty()) return;
          const int64_t i = begin + static_cast<int64_t>(k);
          Status st = parse_record(bytes, &part.tensors);
          if (st.ok()) st = check_record_layout(part.tensors, layout_);
          if (!st.ok()) {
            part.error = "record " + keys_[i].to_hex() + ": " + st.to_string();
            return;
          }
          for (size_t j = 0; j < part.tensors.size(); ++j) {
            const RecordTensor& rt = part.tensors[j];
            if (variable_) {
              per_sample[j][i] = decode_sample(rt);
            } else if (compact(j)) {
              copy_payload(rt, i, &compacts[j]);
            } else {
              decode_row(rt, fixed[j], i, row_bytes[j],
                         channels_last(j) ? &layout_[j].shape : nullptr, &part.sample);
            }
          }
        },
        &part.statuses);
  };
  // A few samples are not worth a thread: parts of at least 8.
  const int64_t count =
      load_threads_ == 1
          ? load_on_read_threads(n, decoded_sample_bytes(layout_), &parts_, load_part)
          : load_in_parts(n, load_threads_, &parts_, load_part);
  for (int64_t p = 0; p < count; ++p) {
    throw_if_part_failed(store_.dir(), parts_[p].error, parts_[p].statuses,
                         keys_.data() + n * p / count);
  }
  for (size_t j = 0; j < layout_.size(); ++j) {
    const c10::MemoryFormat format = channels_last(j) ? format_ : c10::MemoryFormat::Contiguous;
    if (compact(j)) {
      out->set(layout_[j].name, expand_compact(compacts[j], device_, format));
      continue;
    }
    torch::Tensor t =
        variable_ ? pad_and_stack(per_sample[j], torch_dtype(layout_[j].dtype)) : fixed[j];
    out->set(layout_[j].name, on_device(t, device_));
  }
  out->labels = on_device(y, device_);
}

RawBatches::RawBatches(const Dataset& data, BlockStack prefix, const torch::Device& device)
    : data_(data), prefix_(std::move(prefix)), device_(device) {}

RawBatches::RawBatches(const Dataset& data, BlockStack prefix, const torch::Device& device,
                       Augment augment, uint64_t seed)
    : data_(data),
      prefix_(std::move(prefix)),
      device_(device),
      augment_(std::move(augment)),
      seed_(seed) {
  if (!augment_.empty() && (data_.is_text || data_.float_pixels || data_.item_shape.size() != 3)) {
    throw std::invalid_argument("--augment needs images of uint8 pixels; this data holds " +
                                std::string(data_.is_text ? "text" : "float32 inputs"));
  }
}

void RawBatches::load(const int64_t* indices, int64_t n, Batch* out) {
  const int64_t size = static_cast<int64_t>(data_.size());
  torch::Tensor x;
  if (augment_.empty()) {
    x = image_batch(data_, indices, n, device_);
  } else {
    // Each sample's pixels augmented with its draw's seed, then preprocessed as a batch.
    const int64_t item = data_.item_bytes();
    const std::vector<int64_t>& shape = data_.item_shape;
    views_.item_shape = data_.item_shape;
    views_.norm_mean = data_.norm_mean;
    views_.norm_std = data_.norm_std;
    views_.pixels.resize(static_cast<size_t>(n * item));
    views_.labels.assign(static_cast<size_t>(n), 0);
    at::parallel_for(0, n, 8, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) {
        const int64_t p = indices[i] % size, draw = indices[i] / size;
        uint8_t* px = views_.pixels.data() + i * item;
        std::memcpy(px, data_.item_pixels(static_cast<size_t>(p)), static_cast<size_t>(item));
        const uint64_t seed = (seed_ * 0x9E3779B97F4A7C15ULL) ^ (static_cast<uint64_t>(p) << 20) ^
                              static_cast<uint64_t>(draw) * 0xC2B2AE3D27D4EB4FULL;
        augment_.apply(px, shape[0], shape[1], shape[2], seed);
      }
    });
    std::vector<int64_t> rows(static_cast<size_t>(n));
    std::iota(rows.begin(), rows.end(), int64_t{0});
    x = image_batch(views_, rows.data(), n, device_);
  }
  if (prefix_->size() > 0) {
    torch::NoGradGuard no_grad;
    x = prefix_->forward(x);
  }
  torch::Tensor y = torch::empty({n}, torch::kInt64);
  int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) yp[i] = data_.labels[indices[i] % size];
  out->clear();
  out->set("input", x);
  out->labels = y.to(device_);
}

}  // namespace recycle
