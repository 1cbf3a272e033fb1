#include "engine/distributed/adacomp_hook.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/distributed/comm_hook.h"

namespace recycle {

namespace {

// 2^(-k/8) for k = 0..127, so every rank decodes with the same multipliers.
const std::array<float, 128>& magnitude_table() {
  static const std::array<float, 128> table = [] {
    std::array<float, 128> t{};
    for (int k = 0; k < 128; ++k) t[k] = static_cast<float>(std::exp2(-k / 8.0));
    return t;
  }();
  return table;
}

}  // namespace

void adacomp_select_bin(const float* G, const float* H, int64_t n, uint32_t offset,
                        std::vector<uint32_t>* picked) {
  float gmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) gmax = std::max(gmax, std::fabs(G[i]));
  if (!(gmax > 0.0f) || !std::isfinite(gmax)) return;
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(H[i]) >= gmax) picked->push_back(offset + static_cast<uint32_t>(i));
  }
}

bool adacomp_quantise(float value, float scale, uint8_t* code) {
  if (value == 0.0f) return false;
  const double k = std::nearbyint(-8.0 * std::log2(std::fabs(static_cast<double>(value)) / scale));
  if (k > 127.0) return false;
  const uint8_t magnitude = static_cast<uint8_t>(std::max(0.0, k));
  *code = static_cast<uint8_t>((value < 0.0f ? 0x80 : 0x00) | magnitude);
  return true;
}

float adacomp_dequantise(uint8_t code, float scale) {
  const float m = scale * magnitude_table()[code & 0x7F];
  return (code & 0x80) ? -m : m;
}

void adacomp_encode(int64_t index, uint8_t code, int64_t* last, std::vector<uint8_t>* bytes) {
  int64_t gap = index - *last;
  for (int64_t units = (gap - 1) / 255; units > 0;) {
    const int64_t m = std::min<int64_t>(units, 256);
    bytes->push_back(0);
    bytes->push_back(static_cast<uint8_t>(m - 1));
    units -= m;
    gap -= 255 * m;
  }
  bytes->push_back(static_cast<uint8_t>(gap));
  bytes->push_back(code);
  *last = index;
}

void adacomp_throw_bad_packet(int64_t index, int64_t size, int64_t n) {
  if (index < 0) {
    throw std::runtime_error("topk: a peer sent a packet of " + std::to_string(size) +
                             " bytes (odd) for a bucket of " + std::to_string(n) + " elements");
  }
  throw std::runtime_error("topk: a peer sent index " + std::to_string(index) +
                           " for a bucket of " + std::to_string(n) + " elements");
}

void adacomp_decode_add(const uint8_t* bytes, int64_t size, float scale, float* out, int64_t n) {
  adacomp_for_each(bytes, size, n, [&](int64_t index, uint8_t code) {
    out[index] += adacomp_dequantise(code, scale);
  });
}

AdaCompCompressor::AdaCompCompressor(int64_t bin) : bin_(bin) {
  if (bin < 1) {
    throw std::invalid_argument("topk: bin length must be >= 1, got " + std::to_string(bin));
  }
}

const std::vector<float>* AdaCompCompressor::residue(int64_t bucket) const {
  auto it = residues_.find(bucket);
  return it == residues_.end() ? nullptr : &it->second;
}

void AdaCompCompressor::compress(int64_t bucket, const float* grad, int64_t n, AdaCompPacket* out) {
  if (n > kAdaCompMaxElements) {
    throw std::invalid_argument("topk: bucket " + std::to_string(bucket) + " has " +
                                std::to_string(n) + " elements, more than 2^28");
  }
  std::vector<float>& residue = residues_[bucket];
  if (residue.empty()) {
    residue.assign(static_cast<size_t>(n), 0.0f);
  } else if (static_cast<int64_t>(residue.size()) != n) {
    throw std::invalid_argument("topk: bucket " + std::to_string(bucket) + " had " +
                                std::to_string(residue.size()) + " elements, now " +
                                std::to_string(n));
  }
  g_.resize(static_cast<size_t>(n));
  h_.resize(static_cast<size_t>(n));
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    g_[i] = residue[i] + grad[i];
    h_[i] = g_[i] + grad[i];
    finite = finite && std::isfinite(h_[i]);
  }
  out->bytes.clear();
  out->elements = 0;
  if (!finite) {
    // The job is about to stop on a non-finite loss; tell every rank (see AdaCompPacket).
    out->scale = std::numeric_limits<float>::quiet_NaN();
    std::copy(g_.begin(), g_.end(), residue.begin());
    return;
  }
  picked_.clear();
  for (int64_t start = 0; start < n; start += bin_) {
    adacomp_select_bin(g_.data() + start, h_.data() + start, std::min(bin_, n - start),
                       static_cast<uint32_t>(start), &picked_);
  }
  float scale = 0.0f;
  for (uint32_t i : picked_) scale = std::max(scale, std::fabs(g_[i]));
  out->scale = scale;
  int64_t last = -1;
  for (uint32_t i : picked_) {
    uint8_t code = 0;
    if (!adacomp_quantise(g_[i], scale, &code)) continue;
    adacomp_encode(i, code, &last, &out->bytes);
    ++out->elements;
    // What is sent leaves G; its quantisation error stays in the residue.
    g_[i] -= adacomp_dequantise(code, scale);
  }
  std::copy(g_.begin(), g_.end(), residue.begin());
}

namespace {

class AdaCompHook final : public CommHook {
 public:
  AdaCompHook(c10::intrusive_ptr<c10d::ProcessGroup> group,
              std::shared_ptr<AdaCompCompressor> compressor)
      : group_(std::move(group)), compressor_(std::move(compressor)) {
    if (!compressor_) compressor_ = std::make_shared<AdaCompCompressor>();
  }
  std::string name() const override { return "topk"; }

  void reduce(int64_t bucket, torch::Tensor& grad) override {
    if (grad.is_cuda()) {
      // AdaComp selects and packs on the CPU, and its packets go over Gloo: a GPU's bucket goes
      // down, is reduced, and comes back.
      torch::Tensor host = grad.to(torch::kCPU).contiguous();
      reduce(bucket, host);
      grad.copy_(host);
      return;
    }
    TORCH_CHECK(grad.scalar_type() == torch::kFloat && grad.is_contiguous() && grad.is_cpu(),
                "topk: a bucket must be contiguous float32 on the CPU");
    const int64_t n = grad.numel();
    float* data = grad.data_ptr<float>();
    compressor_->compress(bucket, data, n, &packet_);
    const int world = group_->getSize();

    // 1. Every rank's count and scale (the scale's bits in an int32).
    int32_t header[2];
    header[0] = static_cast<int32_t>(packet_.bytes.size());
    std::memcpy(&header[1], &packet_.scale, sizeof(float));
    std::vector<torch::Tensor> header_in{torch::from_blob(header, {2}, torch::kInt32).clone()};
    std::vector<std::vector<torch::Tensor>> header_out(1);
    for (int r = 0; r < world; ++r) header_out[0].push_back(torch::empty({2}, torch::kInt32));
    group_->allgather(header_out, header_in)->wait();
    int64_t sent = 2 * static_cast<int64_t>(sizeof(int32_t));

    std::vector<int64_t> sizes(world);
    std::vector<float> scales(world);
    int64_t max_size = 0;
    bool finite = true;
    for (int r = 0; r < world; ++r) {
      const int32_t* h = header_out[0][r].data_ptr<int32_t>();
      sizes[r] = h[0];
      if (sizes[r] < 0) {
        throw std::runtime_error("topk: rank " + std::to_string(r) + " announced a packet of " +
                                 std::to_string(sizes[r]) + " bytes");
      }
      std::memcpy(&scales[r], &h[1], sizeof(float));
      max_size = std::max(max_size, sizes[r]);
      finite = finite && std::isfinite(scales[r]);
    }

    // 2. The packets, padded to the largest (ranks ignore what is past a rank's size).
    std::vector<std::vector<torch::Tensor>> bytes_out(1);
    if (max_size > 0) {
      torch::Tensor bytes_in = torch::zeros({max_size}, torch::kUInt8);
      std::memcpy(bytes_in.data_ptr<uint8_t>(), packet_.bytes.data(), packet_.bytes.size());
      std::vector<torch::Tensor> in{bytes_in};
      for (int r = 0; r < world; ++r) {
        bytes_out[0].push_back(torch::empty({max_size}, torch::kUInt8));
      }
      group_->allgather(bytes_out, in)->wait();
      sent += max_size;
    }

    // 3. Every rank sums the same packets in the same order: identical results everywhere.
    if (!finite) {
      grad.fill_(std::numeric_limits<float>::quiet_NaN());
    } else {
      grad.zero_();
      for (int r = 0; r < world && max_size > 0; ++r) {
        adacomp_decode_add(bytes_out[0][r].data_ptr<uint8_t>(), sizes[r], scales[r], data, n);
      }
      grad.div_(world);
    }
    count(sent, n * static_cast<int64_t>(sizeof(float)));
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<AdaCompCompressor> compressor_;
  AdaCompPacket packet_;
};

}  // namespace

std::unique_ptr<CommHook> make_adacomp_hook(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                            std::shared_ptr<AdaCompCompressor> compressor) {
  return std::make_unique<AdaCompHook>(std::move(group), std::move(compressor));
}

}  // namespace recycle
