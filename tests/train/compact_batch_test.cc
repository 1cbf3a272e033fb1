// Batches widened on the device (engine/train/compact_batch.h, CachedBatches::set_device_decode):
// on the CPU device they hold the host decode's values for every compact codec, in either
// memory format; on a GPU (GpuBatches.*, skipped on these CI machines) they hold the CPU's.
#include "engine/train/compact_batch.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/codec.h"
#include "cache/record.h"
#include "engine/train/batch_sources.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"

namespace {

using recycle::Batch;
using recycle::CachedBatches;
using recycle::Codec;
using recycle::CompactTensor;
using recycle::RecordTensor;
using recycle::testing::TempDir;

const std::vector<Codec> kCompactCodecs = {Codec::kFp16, Codec::kBf16, Codec::kInt8};

// Values of sample i: channels of very different ranges (int8 keeps a scale per channel).
std::vector<float> values_of(int64_t i, int64_t numel, int64_t channels) {
  std::mt19937 gen(static_cast<uint32_t>(1000 + i));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(numel));
  const int64_t per = numel / channels;
  for (int64_t k = 0; k < numel; ++k) {
    const float scale = 0.01f * static_cast<float>(1 + 30 * (k / per));
    v[k] = scale * normal(gen) + static_cast<float>(k / per);
  }
  return v;
}

// Both tensors equal: fp16 and bf16 widen exactly; int8 within a rounding of the host's
// offset + scale * q (which the compiler may fuse into one multiply-add).
void expect_same_values(const torch::Tensor& got, const torch::Tensor& want, Codec codec,
                        const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.scalar_type(), torch::kFloat32) << what;
  if (codec == Codec::kInt8) {
    EXPECT_TRUE(torch::allclose(got, want, /*rtol=*/1e-6, /*atol=*/1e-6)) << what;
  } else {
    EXPECT_TRUE(torch::equal(got, want)) << what;
  }
}

TEST(CompactBatch, WidensEveryCodecAsTheHostDecodes) {
  for (Codec codec : kCompactCodecs) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{4, 3, 3}, {7}, {}, {5, 16}}) {
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      const int64_t channels = static_cast<int64_t>(recycle::channels_of(shape)), n = 6;
      CompactTensor c = recycle::make_compact(codec, shape, n, /*pinned=*/false);
      std::vector<int64_t> full = {n};
      full.insert(full.end(), shape.begin(), shape.end());
      torch::Tensor want = torch::empty(full, torch::kFloat32);
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<float> v = values_of(i, numel, channels);
        const std::string record = recycle::encode_record(codec, {{v.data(), shape}});
        std::vector<RecordTensor> tensors;
        ASSERT_TRUE(recycle::parse_record(record, &tensors).ok());
        recycle::decode_tensor(tensors[0], want[i].data_ptr<float>());
        recycle::copy_payload(tensors[0], i, &c);
      }
      const torch::Tensor got = recycle::expand_compact(c, torch::kCPU);
      expect_same_values(got, want, codec,
                         recycle::codec_name(codec) + " " + std::to_string(shape.size()) + "-d");
    }
  }
}

TEST(CompactBatch, RefusesARecordOfAnotherCodecOrShape) {
  const std::vector<float> v(6, 1.5f);
  const std::string record = recycle::encode_record(Codec::kBf16, {{v.data(), {2, 3}}});
  std::vector<RecordTensor> tensors;
  ASSERT_TRUE(recycle::parse_record(record, &tensors).ok());
  CompactTensor fp16 = recycle::make_compact(Codec::kFp16, {2, 3}, 1, false);
  EXPECT_THROW(recycle::copy_payload(tensors[0], 0, &fp16), std::invalid_argument);
  CompactTensor other_shape = recycle::make_compact(Codec::kBf16, {3, 2}, 1, false);
  EXPECT_THROW(recycle::copy_payload(tensors[0], 0, &other_shape), std::invalid_argument);
  EXPECT_THROW(recycle::make_compact(Codec::kFp32, {2, 3}, 1, false), std::invalid_argument);
}

// A cache of n records [4, 3, 3] in `codec` and a complete split "train" of them, labels i % 3.
struct CodecCache {
  TempDir tmp;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::Manifest manifest;
  CodecCache(Codec codec, int n) {
    EXPECT_OK(recycle::ActivationStore::open(tmp.file("cache"), recycle::StoreOptions(), &store));
    recycle::ActivationStore::Batch batch(*store);
    for (int i = 0; i < n; ++i) {
      const std::vector<float> v = values_of(i, 36, 4);
      const recycle::Key key{7, static_cast<uint64_t>(i)};
      recycle::StoreTestAccess::put_record(batch, key,
                                           recycle::encode_record(codec, {{v.data(), {4, 3, 3}}}));
      recycle::StoreTestAccess::put_index(batch, "train", i, {key, i % 3});
    }
    manifest.codec = codec;
    manifest.record_shapes = {{4, 3, 3}};
    manifest.class_names = {"a", "b", "c"};
    recycle::SplitInfo info;
    info.data = "test data";
    info.samples = info.unique = n;
    info.complete = true;
    manifest.splits["train"] = info;
    recycle::StoreTestAccess::put_manifest(batch, manifest);
    EXPECT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
};

TEST(CompactBatch, CachedBatchesWidenedOnTheCpuHoldTheHostDecodesBatches) {
  for (Codec codec : kCompactCodecs) {
    for (c10::MemoryFormat format :
         {c10::MemoryFormat::Contiguous, c10::MemoryFormat::ChannelsLast}) {
      CodecCache c(codec, 23);
      CachedBatches host(*c.store, c.manifest, "train", torch::kCPU, format);
      CachedBatches widened(*c.store, c.manifest, "train", torch::kCPU, format);
      EXPECT_FALSE(widened.device_decode());  // the CPU device decodes on the host by default
      widened.set_device_decode(true);
      std::vector<int64_t> order(23);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(5));
      Batch want, got;
      for (size_t pos = 0; pos < order.size(); pos += 5) {
        const int64_t n = std::min<int64_t>(5, static_cast<int64_t>(order.size() - pos));
        host.load(order.data() + pos, n, &want);
        widened.load(order.data() + pos, n, &got);
        const std::string what = recycle::codec_name(codec) + " batch at " + std::to_string(pos);
        expect_same_values(got.features(), want.features(), codec, what);
        EXPECT_TRUE(got.features().is_contiguous(format)) << what;
        EXPECT_TRUE(torch::equal(got.labels, want.labels)) << what;
      }
    }
  }
}

TEST(GpuBatches, WidenedOnTheGpuTheyHoldTheCpusBatches) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU is usable here";
  for (Codec codec : kCompactCodecs) {
    CodecCache c(codec, 19);
    CachedBatches cpu(*c.store, c.manifest, "train", torch::kCPU);
    CachedBatches gpu(*c.store, c.manifest, "train", torch::Device(torch::kCUDA, 0));
    EXPECT_TRUE(gpu.device_decode());  // on by itself for a CUDA device
    std::vector<int64_t> order(19);
    std::iota(order.begin(), order.end(), 0);
    Batch want, got;
    for (size_t pos = 0; pos < order.size(); pos += 4) {
      const int64_t n = std::min<int64_t>(4, static_cast<int64_t>(order.size() - pos));
      cpu.load(order.data() + pos, n, &want);
      gpu.load(order.data() + pos, n, &got);
      ASSERT_TRUE(got.features().is_cuda());
      expect_same_values(got.features().cpu(), want.features(), codec,
                         recycle::codec_name(codec) + " batch at " + std::to_string(pos));
    }
  }
}

}  // namespace
