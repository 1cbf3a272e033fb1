// imagefolder:DIR (engine/data/source_imagefolder.cc), image decoding (image_decode.h) and
// --transform (image_transform.h), on small files the tests make.
#include <gtest/gtest.h>
#include <zlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/data/data_source.h"
#include "engine/data/dataset.h"
#include "engine/data/image_decode.h"
#include "engine/data/image_stream.h"
#include "engine/data/image_transform.h"
#include "tests/data/image_files.h"
#include "tests/test_util.h"
#include "tests/test_paths.h"

namespace recycle {
namespace {

namespace fs = std::filesystem;
using testing::jpeg_bytes;
using testing::png_bytes;
using testing::error_of;
using testing::TempDir;
using testing::write_file;
using testing::write_gray_png;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<uint8_t> pattern(int64_t n, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 13 + seed * 71) % 256);
  return p;
}

// DIR/<class>/<k>.png for classes a, b, c with `per_class` 6x5 gray images each.
std::string make_folder(const TempDir& dir, const std::string& name, int per_class) {
  const fs::path root = dir.path() / name;
  int seed = 0;
  for (const char* cls : {"b", "a", "c"}) {
    fs::create_directories(root / cls);
    for (int k = 0; k < per_class; ++k) {
      write_gray_png((root / cls / (std::to_string(k) + ".png")).string(), 6, 5,
                     pattern(30, seed++));
    }
  }
  return root.string();
}

DatasetOptions folder_options(const std::string& root) {
  DatasetOptions o;
  o.spec = "imagefolder:" + root;
  return o;
}

TEST(DataSources, EverySpecFindsItsSourceAndUnknownOnesListThem) {
  std::string path;
  EXPECT_EQ(find_data_source("fashion-mnist", &path)->name, "fashion-mnist");
  EXPECT_EQ(path, "");
  EXPECT_EQ(find_data_source("fashion-mnist:", &path)->name, "fashion-mnist");
  EXPECT_EQ(find_data_source("fashion-mnist:/x", &path)->name, "fashion-mnist");
  EXPECT_EQ(path, "/x");
  EXPECT_EQ(find_data_source("tsv:a.tsv", &path)->name, "tsv");
  EXPECT_EQ(find_data_source("imagefolder:/d", &path)->name, "imagefolder");
  EXPECT_EQ(path, "/d");
  EXPECT_EQ(find_data_source("tsv:", &path), nullptr);
  EXPECT_EQ(find_data_source("imagefolder", &path), nullptr);
  // The spec as its parts (parse_data_spec): kind, path, and whether it holds texts.
  const std::optional<recycle::DataSpec> folder = recycle::parse_data_spec("imagefolder:/d");
  ASSERT_TRUE(folder);
  EXPECT_EQ(folder->kind, "imagefolder");
  EXPECT_EQ(folder->path, "/d");
  EXPECT_FALSE(folder->text);
  const std::optional<recycle::DataSpec> bare = recycle::parse_data_spec("fashion-mnist");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->kind, "fashion-mnist");
  EXPECT_EQ(bare->path, "");
  const std::optional<recycle::DataSpec> text = recycle::parse_data_spec("jsonl:a:b.jsonl");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->kind, "jsonl");
  EXPECT_EQ(text->path, "a:b.jsonl");
  EXPECT_TRUE(text->text);
  EXPECT_FALSE(recycle::parse_data_spec("mnist:x"));
  EXPECT_FALSE(recycle::parse_data_spec(""));
  DatasetOptions o;
  o.spec = "mnist";
  const std::string e = error_of([&] { o.validate(); });
  EXPECT_TRUE(contains(e, "unknown data 'mnist'")) << e;
  EXPECT_TRUE(contains(e, "imagefolder:DIR")) << e;
}

TEST(ImageFolder, ClassesAreSortedFolderNamesAndFilesSortedWithin) {
  TempDir dir;
  const std::string root = make_folder(dir, "f", 3);
  const Dataset d = load_dataset(folder_options(root));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(d.size(), 9u);
  EXPECT_EQ(d.ids[0], "a/0.png");
  EXPECT_EQ(d.ids[4], "b/1.png");
  EXPECT_EQ(d.labels, (std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(d.item_shape, (std::vector<int64_t>{1, 5, 6}));
  // a/0.png was written fourth (class b first): pattern seed 3.
  EXPECT_EQ(std::vector<uint8_t>(d.item_pixels(0), d.item_pixels(0) + 30), pattern(30, 3));
  EXPECT_EQ(d.transform, "gray");
  // --classes selects by the sorted ids, relabelled; --limit after it.
  DatasetOptions o = folder_options(root);
  o.classes = "1-2";
  o.limit = 4;
  const Dataset s = load_dataset(o);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(s.ids, (std::vector<std::string>{"b/0.png", "b/1.png", "b/2.png", "c/0.png"}));
}

TEST(ImageFolder, SplitFolderIsUsedWhenItExists) {
  TempDir dir;
  make_folder(dir, "root/train", 1);
  fs::create_directories(dir.path() / "root/test/z");
  write_gray_png((dir.path() / "root/test/z/x.png").string(), 6, 5, pattern(30, 9));
  DatasetOptions o = folder_options(dir.file("root"));
  EXPECT_EQ(load_dataset(o).size(), 3u);
  o.split = "test";
  const Dataset t = load_dataset(o);
  EXPECT_EQ(t.class_names, std::vector<std::string>{"z"});
  // No DIR/val (a typo, or a folder without split folders): refused, naming the folder, rather
  // than read DIR's folders (train, test) as the classes of split val.
  o.split = "val";
  try {
    load_dataset(o);
    ADD_FAILURE() << "split val of a folder without val/ was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no folder 'val'"), std::string::npos) << e.what();
  }
}

TEST(ImageFolder, WithoutSplitFoldersOnlyTrainOrTheSplitsOwnFolderIsRead) {
  TempDir dir;
  make_folder(dir, "flat", 1);      // flat/<class>/...: no split folders
  make_folder(dir, "test", 1);      // a folder named after the split it holds
  DatasetOptions o = folder_options(dir.file("flat"));
  EXPECT_EQ(load_dataset(o).size(), 3u);  // train (the default): the folder itself
  o.split = "test";
  EXPECT_THROW(load_dataset(o), std::invalid_argument);
  o.spec = "imagefolder:" + dir.file("test");
  EXPECT_EQ(load_dataset(o).size(), 3u);
  o.spec = "imagefolder:" + dir.file("test") + "/";
  EXPECT_EQ(load_dataset(o).size(), 3u);
}

TEST(ImageFolder, StreamedReadsWhatLoadDatasetLoads) {
  TempDir dir;
  const std::string root = make_folder(dir, "f", 4);
  DatasetOptions o = folder_options(root);
  o.classes = "0,2";
  const Dataset whole = load_dataset(o);
  StreamedImages images;
  const Dataset lean = load_dataset(o, &images);
  ASSERT_TRUE(images.streamed());
  EXPECT_TRUE(lean.pixels.empty());
  EXPECT_EQ(lean.description, whole.description);
  EXPECT_EQ(lean.ids, whole.ids);
  EXPECT_EQ(lean.item_shape, whole.item_shape);
  ImageStream stream(lean, images);
  const int64_t item = whole.item_bytes();
  std::vector<uint8_t> got(whole.size() * item);
  const std::vector<int64_t> first = {0, 1, 2}, rest = {3, 4, 5, 6, 7};
  stream.read(first.data(), 3, got.data());
  stream.read(rest.data(), 5, got.data() + 3 * item);
  stream.finish();
  EXPECT_EQ(got, whole.pixels);
}

TEST(ImageFolder, EmptyClassFolderAndNoClassesAreErrors) {
  TempDir dir;
  const std::string root = make_folder(dir, "f", 1);
  fs::create_directories(fs::path(root) / "d_empty");
  write_file((fs::path(root) / "d_empty" / "notes.txt").string(), "hello");
  std::string e = error_of([&] { load_dataset(folder_options(root)); });
  EXPECT_TRUE(contains(e, "class folder 'd_empty' has no .png, .jpg or .jpeg file")) << e;
  fs::create_directories(dir.path() / "flat");
  write_gray_png(dir.file("flat/x.png"), 6, 5, pattern(30, 1));
  e = error_of([&] { load_dataset(folder_options(dir.file("flat"))); });
  EXPECT_TRUE(contains(e, "has no class folders")) << e;
  e = error_of([&] { load_dataset(folder_options(dir.file("nowhere"))); });
  EXPECT_TRUE(contains(e, "is not a folder")) << e;
}

// A file named like an image that is not one, a truncated PNG, a truncated JPEG: fail names the
// file; skip leaves them out (listed on stderr), the other samples kept.
TEST(ImageFolder, BadFilesFailNamingThemOrAreSkippedAndCounted) {
  TempDir dir;
  const std::string root = make_folder(dir, "f", 2);
  const fs::path a = fs::path(root) / "a";
  write_file((a / "2_text.png").string(), "this is not an image\n");
  const std::string png = png_bytes(6, 5, SPNG_COLOR_TYPE_GRAYSCALE, 8, pattern(30, 5).data(), 30);
  write_file((a / "3_cut.png").string(), png.substr(0, png.size() - 20));
  const std::string jpg = jpeg_bytes(6, 5, TJPF_GRAY, pattern(30, 6));
  write_file((a / "4_cut.jpg").string(), jpg.substr(0, jpg.size() / 2));
  write_file((a / "readme.txt").string(), "ignored: not an image name");

  DatasetOptions o = folder_options(root);
  o.classes = "0";
  const std::string e = error_of([&] { load_dataset(o); });
  EXPECT_TRUE(contains(e, (a / "2_text.png").string() + ": is not a PNG or JPEG image")) << e;
  EXPECT_TRUE(contains(e, "--on-bad-file skip")) << e;
  o.limit = 3;  // 0.png, 1.png and the text file
  o.on_bad_file = BadFilePolicy::kSkip;
  ::testing::internal::CaptureStderr();
  const Dataset d = load_dataset(o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(d.ids, (std::vector<std::string>{"a/0.png", "a/1.png"}));
  EXPECT_TRUE(contains(err, "skipped 1 file(s)")) << err;
  EXPECT_TRUE(contains(err, "2_text.png")) << err;
  // Every bad file, one by one.
  for (const char* bad : {"3_cut.png", "4_cut.jpg"}) {
    const std::string msg = error_of([&] { decode_image_file((a / bad).string()); });
    EXPECT_TRUE(contains(msg, (a / bad).string() + ": not a valid")) << msg;
  }
  o.limit = 0;
  ::testing::internal::CaptureStderr();
  const Dataset all = load_dataset(o);
  const std::string err_all = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(all.size(), 2u);
  EXPECT_TRUE(contains(err_all, "skipped 3 file(s)")) << err_all;
  EXPECT_TRUE(contains(err_all, "1 file(s) without a .png, .jpg or .jpeg name ignored")) << err_all;
}

TEST(ImageFolder, UnreadableFileIsNamed) {
  TempDir dir;
  const std::string root = make_folder(dir, "f", 1);
  const std::string file = (fs::path(root) / "a" / "0.png").string();
  ASSERT_EQ(chmod(file.c_str(), 0), 0);
  if (FILE* f = std::fopen(file.c_str(), "rb")) {  // root reads whatever the mode says
    std::fclose(f);
    GTEST_SKIP() << "this user reads files of mode 000 (root): nothing to test";
  }
  const std::string e = error_of([&] { load_dataset(folder_options(root)); });
  EXPECT_TRUE(contains(e, file + ": cannot read: Permission denied")) << e;
}

TEST(ImageDecode, PngFormatsConvertAsDocumented) {
  // 16-bit gray: v * 257 scales to v.
  std::vector<uint16_t> g16(12);
  for (size_t i = 0; i < g16.size(); ++i) g16[i] = static_cast<uint16_t>((i * 20) * 257);
  DecodedImage img = decode_image(
      png_bytes(4, 3, SPNG_COLOR_TYPE_GRAYSCALE, 16, g16.data(), g16.size() * 2), "g16.png");
  EXPECT_EQ(img.channels, 1);
  ASSERT_EQ(img.pixels.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(img.pixels[i], i * 20) << i;
  // RGBA: alpha dropped, colours kept.
  std::vector<uint8_t> rgba = {10, 20, 30, 0, 40, 50, 60, 255};
  img = decode_image(png_bytes(2, 1, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 8, rgba.data(), 8), "a.png");
  EXPECT_EQ(img.channels, 3);
  EXPECT_EQ(img.pixels, (std::vector<uint8_t>{10, 20, 30, 40, 50, 60}));
  // 16-bit RGB: 3 channels of 8 bits.
  std::vector<uint16_t> rgb16 = {255 * 257, 0, 128 * 257};
  img = decode_image(png_bytes(1, 1, SPNG_COLOR_TYPE_TRUECOLOR, 16, rgb16.data(), 6), "c.png");
  EXPECT_EQ(img.pixels, (std::vector<uint8_t>{255, 0, 128}));
  // Gray 8-bit as stored.
  img = decode_image(png_bytes(3, 1, SPNG_COLOR_TYPE_GRAYSCALE, 8, "\x01\x02\x03", 3), "g.png");
  EXPECT_EQ(img.pixels, (std::vector<uint8_t>{1, 2, 3}));
}

TEST(ImageDecode, AnImageDeclaringMorePixelsThanTheCapIsRefusedBeforeDecoding) {
  // A 1x1 PNG whose header is made to declare 30000 x 30000 pixels (900 million: a decompression
  // bomb's header), its CRC made right again.
  std::string png = png_bytes(1, 1, SPNG_COLOR_TYPE_GRAYSCALE, 16, "\0\0", 2);
  const uint32_t side = 30000;
  for (int at : {16, 20}) {
    for (int b = 0; b < 4; ++b) png[at + b] = static_cast<char>((side >> (24 - 8 * b)) & 0xff);
  }
  const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17);
  for (int b = 0; b < 4; ++b) png[29 + b] = static_cast<char>((crc >> (24 - 8 * b)) & 0xff);
  const std::string e = error_of([&] { decode_image(png, "bomb.png"); });
  EXPECT_NE(e.find("bomb.png: a PNG of 30000x30000 pixels (declared in its header) is more than "
                   "the 89478485 pixels"), std::string::npos) << e;
  // The same file with its honest header decodes.
  std::string ok = png_bytes(1, 1, SPNG_COLOR_TYPE_GRAYSCALE, 16, "\0\0", 2);
  EXPECT_EQ(decode_image(ok, "ok.png").pixels.size(), 1u);
}

TEST(ImageDecode, JpegGrayAndRgbDecodeAndCmykIsRefused) {
  std::vector<uint8_t> flat(8 * 8 * 3);
  for (size_t i = 0; i < flat.size(); i += 3) {
    flat[i] = 200;
    flat[i + 1] = 100;
    flat[i + 2] = 50;
  }
  DecodedImage img = decode_image(jpeg_bytes(8, 8, TJPF_RGB, flat), "rgb.jpg");
  EXPECT_EQ(img.channels, 3);
  EXPECT_EQ(img.height, 8);
  EXPECT_NEAR(img.pixels[0], 200, 3);
  EXPECT_NEAR(img.pixels[1], 100, 3);
  EXPECT_NEAR(img.pixels[2], 50, 3);
  img = decode_image(jpeg_bytes(8, 8, TJPF_GRAY, std::vector<uint8_t>(64, 77)), "g.jpg");
  EXPECT_EQ(img.channels, 1);
  EXPECT_NEAR(img.pixels[10], 77, 1);
  std::vector<uint8_t> cmyk(8 * 8 * 4, 40);
  const std::string e = error_of([&] { decode_image(jpeg_bytes(8, 8, TJPF_CMYK, cmyk), "k.jpg"); });
  EXPECT_TRUE(contains(e, "k.jpg: is a CMYK JPEG, which is not supported")) << e;
  EXPECT_TRUE(contains(error_of([&] { decode_image("", "e.png"); }), "e.png: is empty"));
}

TEST(ImageTransform, SpecsParseToCanonicalFormsAndBadOnesAreRefused) {
  EXPECT_EQ(ImageTransform::parse("").spec(), "gray");
  EXPECT_EQ(ImageTransform::parse("center-crop=28,resize=32,rgb").spec(),
            "rgb,resize=32,center-crop=28");
  EXPECT_EQ(ImageTransform::parse("rgb,normalize=0.5:0.25:0.125/0.5").spec(),
            "rgb,normalize=0.5:0.25:0.125/0.5");
  for (const char* bad : {"resize=0", "resize=x", "blur", "gray,rgb", "normalize=0.5",
                          "normalize=0.5/0", "normalize=1:2/1", "gray,", "resize=3,resize=4"}) {
    EXPECT_THROW(ImageTransform::parse(bad), std::invalid_argument) << bad;
  }
}

TEST(ImageTransform, TheDefaultMakesTheEncodersInputAndGivenOpsWin) {
  // The encoder's [C, H, W] as far as its spec fixes it (0: the data decides).
  EXPECT_EQ(ImageTransform::parse("", {3, 0, 0}).spec(), "rgb");
  EXPECT_EQ(ImageTransform::parse("", {1, 0, 0}).spec(), "gray");
  EXPECT_EQ(ImageTransform::parse("", {1, 32, 32}).spec(), "gray,resize=32,center-crop=32");
  EXPECT_EQ(ImageTransform::parse("", {3, 28, 32}).spec(), "rgb");  // not square: as stored
  EXPECT_EQ(ImageTransform::parse("gray", {3, 32, 32}).spec(), "gray,resize=32,center-crop=32");
  EXPECT_EQ(ImageTransform::parse("resize=40", {1, 32, 32}).spec(), "gray,resize=40");
  EXPECT_EQ(ImageTransform::parse("center-crop=20", {1, 32, 32}).spec(), "gray,center-crop=20");
  EXPECT_EQ(ImageTransform::parse("rgb", {1, 0, 0}).spec(), "rgb");
}

// tests/fixtures/pil_resize.json (made by make_pil_resize.py beside it): PIL's BILINEAR
// resize, which torchvision's Resize applies to the PIL images ImageFolder loads, of patterned
// images shrunk by up to 8x and enlarged by up to 2.5x. The filter computes as PIL does (22-bit
// fixed point, bytes between the passes): every byte is PIL's.
TEST(ImageTransform, ResizeMatchesPil) {
  std::ifstream in(std::string(recycle::testing::kSourceDir) + "/tests/fixtures/pil_resize.json");
  ASSERT_TRUE(in) << "tests/fixtures/pil_resize.json is missing";
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j.at("cases").size(), 5u);
  for (const nlohmann::json& k : j.at("cases")) {
    const int64_t c = k.at("channels"), h = k.at("height"), w = k.at("width");
    const int64_t oh = k.at("out_height"), ow = k.at("out_width");
    std::vector<uint8_t> image(static_cast<size_t>(c * h * w));
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) {
          image[(ch * h + y) * w + x] =
              static_cast<uint8_t>((x * x * 3 + y * 5 + ch * 11 + x * y + (y * y * x) % 31) % 256);
        }
      }
    }
    std::vector<uint8_t> out(static_cast<size_t>(c * oh * ow));
    resize_bilinear_antialias(image.data(), c, h, w, out.data(), oh, ow);
    const std::string hex = k.at("pil");
    ASSERT_EQ(hex.size(), out.size() * 2);
    int64_t differ = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      differ += std::stoi(hex.substr(2 * i, 2), nullptr, 16) != static_cast<int>(out[i]);
    }
    EXPECT_EQ(differ, 0) << h << "x" << w << " -> " << oh << "x" << ow << ": " << differ << " of "
                         << out.size() << " bytes differ from PIL's";
  }
}

TEST(ImageTransform, ResizeCropAndGrayFollowTorchvision) {
  // A constant image stays constant at any size; the shorter side goes to S.
  std::vector<uint8_t> flat(40 * 20, 123);
  const ImageTransform t = ImageTransform::parse("resize=10");
  int64_t oh = 0, ow = 0;
  t.output_size(40, 20, &oh, &ow);
  EXPECT_EQ(oh, 20);
  EXPECT_EQ(ow, 10);
  std::vector<uint8_t> out(static_cast<size_t>(oh * ow));
  t.apply(flat.data(), 40, 20, 1, out.data());
  for (uint8_t v : out) EXPECT_EQ(v, 123);
  // Halving averages pairs with the antialiased filter's weights (1/8, 3/8, 3/8, 1/8).
  const std::vector<uint8_t> row = {0, 80, 160, 240, 0, 80, 160, 240};
  std::vector<uint8_t> half(4);
  resize_bilinear_antialias(row.data(), 1, 1, 8, half.data(), 1, 4);
  // Output 1 is centred on input 3: inputs 1-4 (80, 160, 240, 0) weigh 1/8, 3/8, 3/8, 1/8.
  EXPECT_EQ(half[1], 160);
  // Resizing to the same size is the identity.
  std::vector<uint8_t> same(8);
  resize_bilinear_antialias(row.data(), 1, 1, 8, same.data(), 1, 8);
  EXPECT_EQ(same, row);
  // Center crop: top = round((H - S) / 2) with halves to even, as torchvision.
  std::vector<uint8_t> ramp(5 * 5);
  for (int i = 0; i < 25; ++i) ramp[i] = static_cast<uint8_t>(i);
  std::vector<uint8_t> c2(4);
  ImageTransform::parse("center-crop=2").apply(ramp.data(), 5, 5, 1, c2.data());
  EXPECT_EQ(c2, (std::vector<uint8_t>{12, 13, 17, 18}));  // top = left = round(1.5) = 2
  // Gray: PIL's luma.
  const uint8_t rgb[] = {255, 0, 0, 0, 255, 0, 0, 0, 255};
  uint8_t g[3];
  ImageTransform::parse("gray").apply(rgb, 1, 3, 3, g);
  EXPECT_EQ(g[0], 76);
  EXPECT_EQ(g[1], 150);
  EXPECT_EQ(g[2], 29);
}

}  // namespace
}  // namespace recycle
