// npy:DIR (engine/data/source_npy.cc) on .npy files the tests write.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <utility>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/image_stream.h"
#include "tests/data/npy_files.h"
#include "tests/test_util.h"

namespace recycle {
namespace {

using testing::npy_bytes;
using testing::error_of;
using testing::TempDir;
using testing::write_file;

DatasetOptions npy_options(const TempDir& dir, const std::string& split = "train") {
  DatasetOptions o;
  o.spec = "npy:" + dir.path().string();
  o.split = split;
  return o;
}

TEST(Npy, Uint8PixelsAndLabelsLoadAndStream) {
  TempDir dir;
  std::vector<uint8_t> x(5 * 2 * 3 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 7);
  const std::vector<int32_t> y = {2, 0, 1, 2, 0};
  write_file(dir.file("train_x.npy"), npy_bytes("|u1", {5, 2, 3, 4}, x.data(), x.size()));
  write_file(dir.file("train_y.npy"), npy_bytes("<i4", {5}, y.data(), y.size() * 4));
  DatasetOptions o = npy_options(dir);
  const Dataset d = load_dataset(o);
  EXPECT_FALSE(d.float_pixels);
  EXPECT_EQ(d.item_shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{2, 0, 1, 2, 0}));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(d.pixels, x);
  o.classes = "2";
  StreamedImages images;
  const Dataset lean = load_dataset(o, &images);
  ASSERT_TRUE(images.streamed());
  EXPECT_EQ(lean.ids, (std::vector<std::string>{"train/0", "train/3"}));
  ImageStream stream(lean, images);
  std::vector<uint8_t> got(2 * 24);
  const int64_t pos[] = {0, 1};
  stream.read(pos, 2, got.data());
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 24, x.begin()));
  EXPECT_TRUE(std::equal(got.begin() + 24, got.end(), x.begin() + 3 * 24));
}

TEST(Npy, Float32InputsAreKeyedAsFloat32) {
  TempDir dir;
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.5f, 0.0f, 1.0f};  // 2 samples of 1x1x3
  const std::vector<uint8_t> y = {1, 0};
  write_file(dir.file("test_x.npy"), npy_bytes("<f4", {2, 1, 1, 3}, x.data(), x.size() * 4));
  write_file(dir.file("test_y.npy"), npy_bytes("|u1", {2}, y.data(), 2));
  const Dataset d = load_dataset(npy_options(dir, "test"));
  EXPECT_TRUE(d.float_pixels);
  EXPECT_EQ(d.item_bytes(), 12);
  float first[3];
  std::memcpy(first, d.item_pixels(0), 12);
  EXPECT_EQ(first[1], -1.0f);
  TensorView view;
  const KeyInput in = d.key_input(1, &view);
  EXPECT_EQ(in.tensor->dtype, "float32");
  EXPECT_EQ(in.tensor->element_size, 4u);
}

TEST(Npy, NonFiniteInputsAreRefusedNamingTheSample) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const auto& [bad_value, what] : {std::pair<float, std::string>{nan, "NaN"},
                                        {-inf, "an infinity"}}) {
    TempDir dir;
    std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.5f, 0.0f, 1.0f, 4.0f, 5.0f, 6.0f};
    x[5] = bad_value;  // sample 1, value 2
    const std::vector<uint8_t> y = {1, 0, 1};
    write_file(dir.file("train_x.npy"), npy_bytes("<f4", {3, 1, 1, 3}, x.data(), x.size() * 4));
    write_file(dir.file("train_y.npy"), npy_bytes("|u1", {3}, y.data(), 3));
    const std::string e = error_of([&] { load_dataset(npy_options(dir)); });
    EXPECT_NE(e.find("train_x.npy: sample 1 holds " + what + " at value 2"), std::string::npos)
        << e;
    // Streamed (recycle-build's way): the same refusal when the row is read.
    StreamedImages images;
    const Dataset lean = load_dataset(npy_options(dir), &images);
    ASSERT_TRUE(images.streamed());
    ImageStream stream(lean, images);
    std::vector<uint8_t> got(3 * 12);
    const int64_t pos[] = {0, 1, 2};
    const std::string streamed = error_of([&] { stream.read(pos, 3, got.data()); });
    EXPECT_NE(streamed.find("sample 1 holds " + what), std::string::npos) << streamed;
  }
}

TEST(Npy, TokenIdsLoadWithTheirMaskAndAreKeyedAsInt64) {
  TempDir dir;
  const std::vector<int32_t> ids = {101, 7, 102, 0, 101, 102, 0, 0, 101, 5, 6, 102};  // 3 x 4
  const std::vector<uint8_t> mask = {1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1};
  const std::vector<uint8_t> y = {1, 0, 1};
  write_file(dir.file("train_x.npy"), npy_bytes("<i4", {3, 4}, ids.data(), ids.size() * 4));
  write_file(dir.file("train_mask.npy"), npy_bytes("|u1", {3, 4}, mask.data(), mask.size()));
  write_file(dir.file("train_y.npy"), npy_bytes("|u1", {3}, y.data(), 3));
  DatasetOptions o = npy_options(dir);
  o.classes = "1";
  const Dataset d = load_dataset(o);
  EXPECT_TRUE(d.token_ids);
  EXPECT_FALSE(d.is_text);
  EXPECT_EQ(d.item_shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(d.item_bytes(), 64);
  ASSERT_EQ(d.size(), 2u);
  int64_t second[8];  // sample 2: its ids, then its mask
  std::memcpy(second, d.item_pixels(1), 64);
  EXPECT_EQ(std::vector<int64_t>(second, second + 8),
            (std::vector<int64_t>{101, 5, 6, 102, 1, 1, 1, 1}));
  TensorView view;
  const KeyInput in = d.key_input(0, &view);
  EXPECT_EQ(in.tensor->dtype, "int64");
  EXPECT_EQ(in.tensor->element_size, 8u);
  EXPECT_EQ(in.tensor->shape, (std::vector<int64_t>{2, 3}));  // its own 3 positions
  EXPECT_EQ(in.tensor->strides, (std::vector<int64_t>{4, 1}));
}

TEST(Npy, BadTokenIdsAndMasksAreRefusedNamingTheSample) {
  TempDir dir;
  const std::vector<int64_t> ids = {101, 7, 102, 101, 102, 0};
  const std::vector<uint8_t> y = {1, 0};
  write_file(dir.file("train_x.npy"), npy_bytes("<i8", {2, 3}, ids.data(), ids.size() * 8));
  write_file(dir.file("train_y.npy"), npy_bytes("|u1", {2}, y.data(), 2));
  std::string e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("train_mask.npy is missing"), std::string::npos) << e;
  const std::vector<uint8_t> left = {1, 1, 1, 0, 1, 1};  // sample 1 padded on the left
  write_file(dir.file("train_mask.npy"), npy_bytes("|u1", {2, 3}, left.data(), 6));
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("train_mask.npy: sample 1's mask is not 1s then 0s"), std::string::npos) << e;
  write_file(dir.file("train_mask.npy"), npy_bytes("|u1", {3, 2}, left.data(), 6));
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("mask's shape differs"), std::string::npos) << e;
  const std::vector<int64_t> negative = {101, -3, 102, 101, 102, 0};
  const std::vector<uint8_t> right = {1, 1, 1, 1, 1, 0};
  write_file(dir.file("train_mask.npy"), npy_bytes("|u1", {2, 3}, right.data(), 6));
  write_file(dir.file("train_x.npy"), npy_bytes("<i8", {2, 3}, negative.data(), 48));
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("train_x.npy: sample 0 holds token id -3"), std::string::npos) << e;
  write_file(dir.file("train_x.npy"), npy_bytes("<i8", {2, 3, 1}, ids.data(), 48));
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("integer token ids must be N x L"), std::string::npos) << e;
}

TEST(Npy, BadFilesAreNamed) {
  TempDir dir;
  const std::vector<uint8_t> y = {0, 1};
  write_file(dir.file("train_y.npy"), npy_bytes("|u1", {2}, y.data(), 2));
  const std::vector<double> f64(8, 1.0);
  write_file(dir.file("train_x.npy"), npy_bytes("<f8", {2, 1, 2, 2}, f64.data(), 64));
  std::string e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("train_x.npy: dtype <f8 (expected uint8 or float32"), std::string::npos) << e;
  std::vector<uint8_t> x(2 * 4);
  write_file(dir.file("train_x.npy"), npy_bytes("|u1", {2, 1, 2, 2}, x.data(), 7));
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("has 7 bytes of data, header says 8"), std::string::npos) << e;
  write_file(dir.file("train_x.npy"), npy_bytes("|u1", {3, 1, 2, 2}, x.data(), 12));
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("3 samples"), std::string::npos) << e;
  write_file(dir.file("train_x.npy"), "not numpy");
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("train_x.npy: is not a .npy file"), std::string::npos) << e;
  e = error_of([&] { load_dataset(npy_options(dir, "val")); });
  EXPECT_NE(e.find("val_x.npy: cannot read"), std::string::npos) << e;
  // A byte count past 64 bits (2^32 x 2^32 x 2^4 x 1 here wraps to 0): named, not wrapped.
  write_file(dir.file("train_x.npy"),
             npy_bytes("|u1", {4294967296, 1, 4294967296, 16}, x.data(), 0));
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(
      e.find("train_x.npy: npy shape 4294967296 x 1 x 4294967296 x 16 is larger than any file"),
      std::string::npos)
      << e;
  const std::vector<int8_t> neg = {0, -1};
  write_file(dir.file("train_x.npy"), npy_bytes("|u1", {2, 1, 2, 2}, x.data(), 8));
  write_file(dir.file("train_y.npy"), npy_bytes("|i1", {2}, neg.data(), 2));
  e = error_of([&] { load_dataset(npy_options(dir)); });
  EXPECT_NE(e.find("label -1 of sample 1"), std::string::npos) << e;
}

}  // namespace
}  // namespace recycle
