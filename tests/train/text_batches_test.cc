// Text batches: records of a variable length (hidden states and a length, the layout a text
// build writes) round-trip exactly through the store and batch assembly, padded at batch time
// with the mask rebuilt from the lengths; int and bool tensors of a variable length come back
// exactly; raw text batches tokenize and pad.
#include "engine/train/text_batches.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/record.h"
#include "engine/data/byte_tokenizer.h"
#include "engine/precompute/build_stages.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"

namespace recycle {
namespace {

using testing::TempDir;

Key key_of(int i) { return {7, static_cast<uint64_t>(i)}; }

// Writes `batch` (n records and index entries of split "train") with a manifest of `layout`
// and `classes`, and returns the manifest as stored.
Manifest write_cache(ActivationStore& store, ActivationStore::Batch& batch,
                     const RecordLayout& layout, const std::vector<std::string>& classes, int n) {
  Manifest m;
  m.codec = recycle::Codec::kFp32;
  m.record_layout = layout;
  m.class_names = classes;
  m.splits["train"] = {"test data", n, n, true};
  recycle::StoreTestAccess::put_manifest(batch, m);
  EXPECT_OK(recycle::StoreTestAccess::write(store, &batch));
  Manifest read;
  EXPECT_OK(store.read_manifest(&read));
  return read;
}

// Property: for random lengths and values, every batch of random samples holds each sample's
// hidden states bit for bit at its valid positions, zeros at the padding, and a mask channel
// that is 1 exactly at positions < length.
TEST(TextBatchesTest, VariableLengthRecordsRoundTripExactly) {
  constexpr int64_t kDim = 5;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> length_of(1, 1 + static_cast<int64_t>(seed) * 7);
    std::normal_distribution<float> value(0.0f, 3.0f);
    TempDir tmp;
    std::unique_ptr<ActivationStore> store;
    ASSERT_OK(ActivationStore::open(tmp.file("cache"), StoreOptions(), &store));
    ActivationStore::Batch batch(*store);
    const int n = 40;
    std::vector<std::vector<float>> hidden(n);
    std::vector<int64_t> lengths(n);
    for (int i = 0; i < n; ++i) {
      lengths[i] = length_of(rng);
      hidden[i].resize(static_cast<size_t>(lengths[i] * kDim));
      for (float& v : hidden[i]) v = value(rng);
      recycle::StoreTestAccess::put_record(
          batch, key_of(i),
          encode_record({TypedArrayRef::floats(hidden[i].data(), {lengths[i], kDim}, Codec::kFp32),
                         TypedArrayRef::exact(&lengths[i], {})}));
      recycle::StoreTestAccess::put_index(batch, "train", i, {key_of(i), i % 3});
    }
    const Manifest read =
        write_cache(*store, batch, text_record_layout(kDim, Codec::kFp32), {"a", "b", "c"}, n);
    CachedBatches cached(*store, read, "train", torch::kCPU);
    TextFeatureBatches source(cached);

    std::uniform_int_distribution<int64_t> pick_of(0, n - 1);
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<int64_t> pick(static_cast<size_t>(1 + trial * 4));
      for (int64_t& p : pick) p = pick_of(rng);
      Batch b;
      source.load(pick.data(), static_cast<int64_t>(pick.size()), &b);
      ASSERT_EQ(b.inputs.size(), 1u);
      const torch::Tensor f = b.at("features");
      int64_t longest = 0;
      for (int64_t p : pick) longest = std::max(longest, lengths[p]);
      ASSERT_EQ(f.sizes().vec(),
                (std::vector<int64_t>{static_cast<int64_t>(pick.size()), longest, kDim + 1}));
      for (size_t r = 0; r < pick.size(); ++r) {
        const int64_t len = lengths[pick[r]];
        const torch::Tensor row = f[static_cast<int64_t>(r)];
        const torch::Tensor want =
            torch::from_blob(hidden[pick[r]].data(), {len, kDim}, torch::kFloat32);
        EXPECT_TRUE(torch::equal(row.narrow(0, 0, len).narrow(1, 0, kDim), want));
        EXPECT_TRUE(torch::equal(row.narrow(0, 0, len).select(1, kDim), torch::ones({len})));
        EXPECT_EQ(row.narrow(0, len, longest - len).abs().sum().item<float>(), 0.0f);
        EXPECT_EQ(b.labels[static_cast<int64_t>(r)].item<int64_t>(), pick[r] % 3);
      }
    }
  }
}

// Token ids (int32), masks (bool) and bytes (uint8) of a variable length come back exactly,
// padded with zeros (false).
TEST(TextBatchesTest, IntAndBoolTensorsOfVariableLengthAreExact) {
  std::mt19937 rng(11);
  TempDir tmp;
  std::unique_ptr<ActivationStore> store;
  ASSERT_OK(ActivationStore::open(tmp.file("cache"), StoreOptions(), &store));
  ActivationStore::Batch batch(*store);
  const int n = 12;
  std::vector<std::vector<int32_t>> ids(n);
  std::vector<std::unique_ptr<bool[]>> masks(n);
  std::vector<std::vector<uint8_t>> bytes(n);
  for (int i = 0; i < n; ++i) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 9);
    ids[i].resize(len);
    bytes[i].resize(len);
    masks[i].reset(new bool[len]);
    for (int64_t t = 0; t < len; ++t) {
      ids[i][t] = static_cast<int32_t>(rng());  // any value, negative ones too
      bytes[i][t] = static_cast<uint8_t>(rng());
      masks[i][t] = rng() % 2 == 0;
    }
    recycle::StoreTestAccess::put_record(
        batch, key_of(i),
        encode_record({TypedArrayRef::exact(ids[i].data(), {len}),
                       TypedArrayRef::exact(masks[i].get(), {len}),
                       TypedArrayRef::exact(bytes[i].data(), {len})}));
    recycle::StoreTestAccess::put_index(batch, "train", i, {key_of(i), 0});
  }
  const Manifest read = write_cache(*store, batch,
                                    {{"ids", Dtype::kInt32, {kVariableDim}},
                                     {"mask", Dtype::kBool, {kVariableDim}},
                                     {"bytes", Dtype::kUint8, {kVariableDim}}},
                                    {"only"}, n);
  CachedBatches source(*store, read, "train", torch::kCPU);
  std::vector<int64_t> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  Batch b;
  source.load(all.data(), n, &b);
  ASSERT_EQ(b.at("ids").scalar_type(), torch::kInt32);
  ASSERT_EQ(b.at("mask").scalar_type(), torch::kBool);
  ASSERT_EQ(b.at("bytes").scalar_type(), torch::kUInt8);
  for (int i = 0; i < n; ++i) {
    const int64_t len = static_cast<int64_t>(ids[i].size());
    const int64_t width = b.at("ids").size(1);
    for (int64_t t = 0; t < width; ++t) {
      const bool valid = t < len;
      EXPECT_EQ(b.at("ids")[i][t].item<int32_t>(), valid ? ids[i][t] : 0);
      EXPECT_EQ(b.at("mask")[i][t].item<bool>(), valid ? masks[i][t] : false);
      EXPECT_EQ(b.at("bytes")[i][t].item<uint8_t>(), valid ? bytes[i][t] : 0);
    }
  }
}

TEST(TextBatchesTest, NotATextCacheIsAClearError) {
  TempDir tmp;
  std::unique_ptr<ActivationStore> store;
  ASSERT_OK(ActivationStore::open(tmp.file("cache"), StoreOptions(), &store));
  ActivationStore::Batch batch(*store);
  const float v[2] = {1, 2};
  recycle::StoreTestAccess::put_record(batch, key_of(0), encode_record(Codec::kFp32, {{v, {2}}}));
  recycle::StoreTestAccess::put_index(batch, "train", 0, {key_of(0), 0});
  const Manifest read =
      write_cache(*store, batch, layout_from_shapes({{2}}, recycle::Codec::kFp32), {"only"}, 1);
  CachedBatches cached(*store, read, "train", torch::kCPU);
  TextFeatureBatches source(cached);
  const int64_t pick = 0;
  Batch b;
  EXPECT_THROW(source.load(&pick, 1, &b), std::runtime_error);
}

TEST(TextBatchesTest, RawTextIsTokenizedAndPadded) {
  Dataset data;
  data.is_text = true;
  data.texts = {"abc", "a much longer text"};
  data.labels = {1, 0};
  data.ids = {"line/1", "line/2"};
  data.class_names = {"x", "y"};
  RawTextBatches source(data, BlockStack(), 6, torch::kCPU);
  const std::vector<int64_t> pick = {0, 1};
  Batch b;
  source.load(pick.data(), 2, &b);
  EXPECT_EQ(b.features().sizes().vec(), (std::vector<int64_t>{2, 6}));  // cut to 6 tokens
  EXPECT_EQ(b.features()[0][3].item<int64_t>(), kPadToken);
  EXPECT_EQ(b.features()[1][5].item<int64_t>(), 'h' + 1);
  EXPECT_TRUE(torch::equal(b.labels, torch::tensor({1, 0}, torch::kInt64)));
}

}  // namespace
}  // namespace recycle
