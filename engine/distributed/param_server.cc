#include "engine/distributed/param_server.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/train/trainer.h"

namespace recycle {

ParamLayout::ParamLayout(int64_t total, int64_t bucket_elements, int servers)
    : total_(total), servers_(servers) {
  if (total < 1 || bucket_elements < 1 || servers < 1) {
    throw std::invalid_argument("a parameter layout needs parameters, a bucket size and servers");
  }
  for (int64_t begin = 0; begin < total; begin += bucket_elements) {
    ranges_.emplace_back(begin, std::min(total, begin + bucket_elements));
  }
}

std::vector<int64_t> ParamLayout::buckets_of(int server) const {
  std::vector<int64_t> mine;
  for (int64_t b = server; b < buckets(); b += servers_) mine.push_back(b);
  return mine;
}

int64_t ParamLayout::shard_size(int server) const {
  int64_t n = 0;
  for (int64_t b : buckets_of(server)) n += ranges_[b].second - ranges_[b].first;
  return n;
}

torch::Tensor ParamLayout::gather(const torch::Tensor& flat, int server) const {
  std::vector<torch::Tensor> parts;
  for (int64_t b : buckets_of(server)) {
    parts.push_back(flat.slice(0, ranges_[b].first, ranges_[b].second));
  }
  if (parts.empty()) return torch::empty({0}, flat.options());
  return torch::cat(parts);
}

void ParamLayout::scatter(const torch::Tensor& shard, int server, torch::Tensor& flat) const {
  int64_t at = 0;
  for (int64_t b : buckets_of(server)) {
    const int64_t n = ranges_[b].second - ranges_[b].first;
    flat.slice(0, ranges_[b].first, ranges_[b].second).copy_(shard.slice(0, at, at + n));
    at += n;
  }
}

ParamShard::ParamShard(const torch::Tensor& initial, const TrainHyper& hyper, int world,
                       int64_t sync_steps, int64_t buckets, int64_t done_sync_steps)
    : hyper_(hyper),
      world_(std::max(1, world)),
      sync_steps_(sync_steps),
      local_steps_(std::max<int64_t>(done_sync_steps, 0) * world_) {
  torch::NoGradGuard no_grad;
  param_ = initial.detach().to(torch::kFloat).clone().contiguous();
  param_.set_requires_grad(true);
  optimizer_ = make_optimizer({param_}, hyper_);
  versions_.assign(static_cast<size_t>(std::max<int64_t>(buckets, 0)), 0);
}

int64_t ParamShard::current_version() const {
  return versions_.empty() ? pushes_ : *std::min_element(versions_.begin(), versions_.end());
}

int64_t ParamShard::apply(const torch::Tensor& grad, int64_t steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double lr = scheduled_lr(hyper_, local_steps_ / world_, sync_steps_) * steps /
                    static_cast<double>(world_);
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  param_.mutable_grad() = grad.to(torch::kFloat).reshape_as(param_);
  optimizer_->step();
  param_.mutable_grad().reset();
  local_steps_ += steps;
  ++pushes_;
  for (int64_t& v : versions_) ++v;
  return current_version();
}

torch::Tensor ParamShard::snapshot(int64_t* version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (version) {
    *version = current_version();
  }
  return param_.detach().clone();
}

int64_t ParamShard::version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_version();
}

std::vector<int64_t> ParamShard::bucket_versions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return versions_;
}

int64_t ParamShard::pushes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pushes_;
}

PushEncoder::PushEncoder(GradCompression compression, const ParamLayout& layout, int server)
    : compression_(compression), buckets_(layout.buckets_of(server)) {
  for (int64_t b : buckets_) sizes_.push_back(layout.range(b).second - layout.range(b).first);
}

namespace {

template <typename T>
void append(std::vector<uint8_t>* bytes, const T& value) {
  const size_t at = bytes->size();
  bytes->resize(at + sizeof(T));
  std::memcpy(bytes->data() + at, &value, sizeof(T));
}

[[noreturn]] void bad_push(const std::string& why) {
  throw std::runtime_error("a pushed gradient or fetched shard does not fit the shard: " + why);
}

}  // namespace

std::vector<uint8_t> PushEncoder::encode(const torch::Tensor& shard_grad) {
  const torch::Tensor g = shard_grad.to(torch::kFloat).contiguous();
  std::vector<uint8_t> bytes;
  switch (compression_) {
    case GradCompression::kNone:
      bytes.resize(static_cast<size_t>(g.numel()) * sizeof(float));
      std::memcpy(bytes.data(), g.data_ptr<float>(), bytes.size());
      return bytes;
    case GradCompression::kFp16: {
      const torch::Tensor h = g.to(torch::kHalf).contiguous();
      bytes.resize(static_cast<size_t>(h.numel()) * sizeof(c10::Half));
      std::memcpy(bytes.data(), h.data_ptr<c10::Half>(), bytes.size());
      return bytes;
    }
    case GradCompression::kTopk: {
      const float* data = g.data_ptr<float>();
      int64_t at = 0;
      AdaCompPacket packet;
      for (size_t i = 0; i < buckets_.size(); ++i) {
        adacomp_.compress(buckets_[i], data + at, sizes_[i], &packet);
        append(&bytes, packet.scale);
        append(&bytes, static_cast<int32_t>(packet.bytes.size()));
        bytes.insert(bytes.end(), packet.bytes.begin(), packet.bytes.end());
        at += sizes_[i];
      }
      return bytes;
    }
  }
  throw std::invalid_argument("unknown gradient compression");
}

torch::Tensor decode_shard(GradCompression compression, const ParamLayout& layout, int server,
                           const uint8_t* bytes, int64_t size) {
  const int64_t n = layout.shard_size(server);
  // topk adds its elements into zeros; the others fill every element.
  torch::Tensor g = compression == GradCompression::kTopk ? torch::zeros({n}, torch::kFloat)
                                                          : torch::empty({n}, torch::kFloat);
  switch (compression) {
    case GradCompression::kNone:
      if (size != n * static_cast<int64_t>(sizeof(float))) {
        bad_push(std::to_string(size) + " bytes");
      }
      std::memcpy(g.data_ptr<float>(), bytes, static_cast<size_t>(size));
      return g;
    case GradCompression::kFp16: {
      if (size != n * static_cast<int64_t>(sizeof(c10::Half))) {
        bad_push(std::to_string(size) + " bytes");
      }
      torch::Tensor h = torch::empty({n}, torch::kHalf);
      std::memcpy(h.data_ptr<c10::Half>(), bytes, static_cast<size_t>(size));
      return h.to(torch::kFloat);
    }
    case GradCompression::kTopk: {
      float* out = g.data_ptr<float>();
      int64_t at = 0, pos = 0;
      for (int64_t b : layout.buckets_of(server)) {
        const int64_t elements = layout.range(b).second - layout.range(b).first;
        float scale = 0;
        int32_t count = 0;
        if (pos + static_cast<int64_t>(sizeof(scale) + sizeof(count)) > size) bad_push("truncated");
        std::memcpy(&scale, bytes + pos, sizeof(scale));
        std::memcpy(&count, bytes + pos + sizeof(scale), sizeof(count));
        pos += sizeof(scale) + sizeof(count);
        if (count < 0 || pos + count > size) bad_push("truncated");
        adacomp_decode_add(bytes + pos, count, scale, out + at, elements);
        pos += count;
        at += elements;
      }
      if (pos != size) bad_push(std::to_string(size - pos) + " bytes too many");
      return g;
    }
  }
  throw std::invalid_argument("unknown gradient compression");
}

FetchEncoder::FetchEncoder(GradCompression compression, const ParamLayout& layout, int server,
                           const torch::Tensor& initial)
    : compression_(compression),
      layout_(layout),
      server_(server),
      changes_(compression, layout, server),
      base_(initial.detach().to(torch::kFloat).clone().contiguous()) {}

std::vector<uint8_t> FetchEncoder::encode(const torch::Tensor& shard) {
  torch::NoGradGuard no_grad;
  const torch::Tensor now = shard.detach().to(torch::kFloat).contiguous();
  if (compression_ == GradCompression::kNone) return changes_.encode(now);
  std::vector<uint8_t> bytes = changes_.encode(now - base_);
  if (compression_ == GradCompression::kFp16) {
    // The copy advances by what apply_fetch adds to the worker's: the halves, decoded alike.
    base_ += decode_shard(compression_, layout_, server_, bytes.data(),
                          static_cast<int64_t>(bytes.size()));
  } else {
    base_.copy_(now);  // topk: what was not sent stays in the AdaComp residue
  }
  return bytes;
}

void apply_fetch(GradCompression compression, const ParamLayout& layout, int server,
                 const uint8_t* bytes, int64_t size, torch::Tensor& copy) {
  torch::NoGradGuard no_grad;
  const torch::Tensor decoded = decode_shard(compression, layout, server, bytes, size);
  if (compression == GradCompression::kNone) {
    copy.copy_(decoded);
  } else {
    copy += decoded;
  }
}

}  // namespace recycle
