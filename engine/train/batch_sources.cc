#include "engine/train/batch_sources.h"

#include <stdexcept>

#include "cache/record.h"
#include "engine/models/preprocess.h"

namespace recycle {

CachedBatches::CachedBatches(const ActivationStore& store, const Manifest& manifest,
                             const std::string& split, const torch::Device& device)
    : store_(store), device_(device) {
  const auto info = manifest.splits.find(split);
  if (info == manifest.splits.end()) {
    throw std::runtime_error("cache " + store.dir() + " has no split '" + split + "'");
  }
  // A complete split whose index count differs from its manifest is refused, never trained
  // on in part.
  const Status st = store.read_split_index(split, info->second, &entries_);
  st.throw_if_error();
  if (entries_.empty()) throw std::runtime_error("cache split " + split + " has no samples");
  if (manifest.record_shapes.size() != 1) {
    throw std::runtime_error("cache records hold " + std::to_string(manifest.record_shapes.size()) +
                             " tensors; this trainer reads one");
  }
  record_shape_ = manifest.record_shapes[0];
  for (int64_t d : record_shape_) record_numel_ *= d;
  for (const IndexEntry& e : entries_) {
    if (e.label < 0 || e.label >= static_cast<int64_t>(manifest.class_names.size())) {
      throw std::runtime_error("cache split " + split + " has label " + std::to_string(e.label) +
                               " outside its " + std::to_string(manifest.class_names.size()) +
                               " classes");
    }
  }
}

void CachedBatches::load(const int64_t* indices, int64_t n, Batch* out) {
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), record_shape_.begin(), record_shape_.end());
  torch::Tensor x = torch::empty(shape, torch::kFloat32);
  torch::Tensor y = torch::empty({n}, torch::kInt64);
  float* xp = x.data_ptr<float>();
  int64_t* yp = y.data_ptr<int64_t>();
  std::vector<Key> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    keys[i] = entries_[indices[i]].key;
    yp[i] = entries_[indices[i]].label;
  }
  std::string error;
  std::vector<RecordTensor> parts;
  std::vector<Status> statuses;
  store_.multi_get(
      keys,
      [&](size_t i, std::string_view bytes) {
        if (!error.empty()) return;
        const Status st = parse_record(bytes, &parts);
        if (!st.ok()) {
          error = "record " + keys[i].to_hex() + ": " + st.to_string();
        } else if (parts.size() != 1 || parts[0].shape != record_shape_) {
          error = "record " + keys[i].to_hex() + " has another shape than the manifest says";
        } else {
          decode_tensor(parts[0], xp + static_cast<int64_t>(i) * record_numel_);
        }
      },
      &statuses);
  if (!error.empty()) throw std::runtime_error("corrupt cache " + store_.dir() + ": " + error);
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].is_not_found()) {
      throw std::runtime_error("corrupt cache " + store_.dir() + ": the samples index points to " +
                               keys[i].to_hex() + ", which has no record");
    }
    if (!statuses[i].ok()) throw std::runtime_error("cache " + store_.dir() + ": " + statuses[i].to_string());
  }
  out->clear();
  out->set("activation", x.to(device_));
  out->labels = y.to(device_);
}

RawBatches::RawBatches(const Dataset& data, BlockStack prefix, const torch::Device& device)
    : data_(data), prefix_(std::move(prefix)), device_(device) {}

void RawBatches::load(const int64_t* indices, int64_t n, Batch* out) {
  torch::Tensor x = image_batch(data_, indices, n, device_);
  if (prefix_->size() > 0) {
    torch::NoGradGuard no_grad;
    x = prefix_->forward(x);
  }
  torch::Tensor y = torch::empty({n}, torch::kInt64);
  int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) yp[i] = data_.labels[indices[i]];
  out->clear();
  out->set("input", x);
  out->labels = y.to(device_);
}

}  // namespace recycle
