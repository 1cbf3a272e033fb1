// The build's stages run in-process (no child processes) on a small synthetic IDX data set
// with a width-4 ResNet-18: what a first build computes and indexes, duplicates, a rerun
// that writes nothing, a build stopped midway and resumed, a refused identity, the
// per-chunk output-shape check, an int8 build against an fp32 one, and --compression.
#include "engine/precompute/build_stages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/record.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/chunk_encoder.h"
#include "engine/precompute/prefix_identity.h"
#include "engine/precompute/prefix_runner.h"
#include "engine/precompute/split_inputs.h"
#include "recycle/errors.h"
#include "tests/cache/store_test_access.h"
#include "tests/precompute/cache_contents.h"
#include "tests/precompute/pattern_images.h"
#include "tests/precompute/split_build_access.h"
#include "tests/tool_runner.h"

namespace {

using recycle::testing::CacheContents;
using recycle::testing::read_cache;

using recycle::ActivationStore;
using recycle::BuildChunk;
using recycle::BuildOptions;
using recycle::IndexEntry;
using recycle::Manifest;
using recycle::SplitBuild;
using Pieces = recycle::SplitBuildTestAccess;  // SplitBuild hands its pieces to tests only
using recycle::testing::TempDir;

using recycle::testing::kPatternSide;
using recycle::testing::patterns;
using recycle::testing::write_pattern_images;

BuildOptions options_for(const TempDir& dir, const std::string& cache, int64_t batch = 8) {
  BuildOptions o;
  o.data.spec = "fashion-mnist:" + dir.path().string();
  o.model.width = 4;
  o.recycle = 0.25;
  o.cache_dir = cache;
  o.batch = batch;
  o.progress = false;
  return o;
}

void start(SplitBuild& s) { s.open(); }

// Runs up to max_chunks chunks of a changed split (every chunk when max_chunks < 0) and
// finishes the split when none is left.
void run_chunks(SplitBuild& s, int max_chunks = -1) {
  if (s.plan().unchanged()) return;
  if (!Pieces::split(s).writer().begun()) s.begin();
  BuildChunk chunk;
  for (int done = 0; max_chunks < 0 || done < max_chunks; ++done) {
    if (!s.next_chunk(&chunk)) {
      s.finish();
      return;
    }
    s.compute(&chunk);
    s.write_chunk(&chunk);
  }
}

recycle::BuildReport build_all(const BuildOptions& o) {
  SplitBuild s(o);
  start(s);
  run_chunks(s);
  return s.report();
}

// What a report says a run did.
struct Counts {
  int64_t computed, index_written, skipped, records;
};
void expect_counts(const recycle::BuildReport& r, const Counts& want) {
  EXPECT_EQ(r.computed, want.computed);
  EXPECT_EQ(r.index_written, want.index_written);
  EXPECT_EQ(r.skipped, want.skipped);
  EXPECT_EQ(r.records, want.records);
}

TEST(BuildStages, FirstBuildComputesEveryUniqueKeyAndIndexesEverySample) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(30, 10));
  std::vector<recycle::Key> keys;
  {
    SplitBuild s(options_for(dir, dir.file("cache")));
    start(s);
    EXPECT_FALSE(s.plan().unchanged());
    EXPECT_TRUE(s.plan().existing().empty());
    EXPECT_EQ(s.plan().todo().size(), 40u);
    EXPECT_EQ(s.report().samples, 40);
    EXPECT_EQ(s.report().unique, 30);
    run_chunks(s);
    const recycle::BuildReport r = s.report();
    expect_counts(r, {30, 40, 10, 30});
    EXPECT_GT(r.bytes, 0);
    // The opening write, one per chunk of 8, the closing one.
    EXPECT_EQ(s.writes(), 1 + 5 + 1);
    keys = s.plan().keys();
  }  // the state is dropped: the store closes

  const CacheContents c = read_cache(dir.file("cache"));
  ASSERT_EQ(c.index.size(), 40u);
  for (size_t i = 0; i < c.index.size(); ++i) {
    EXPECT_EQ(c.index[i].key, keys[i]) << i;
    EXPECT_EQ(c.index[i].label, static_cast<int64_t>(i < 30 ? i % 10 : (i - 30) % 10)) << i;
  }
  EXPECT_EQ(c.records.size(), 30u);
  for (const IndexEntry& e : c.index) EXPECT_EQ(c.records.count(e.key.to_hex()), 1u);
  const recycle::SplitInfo& info = c.manifest.splits.at("train");
  EXPECT_TRUE(info.complete);
  EXPECT_EQ(info.samples, 40);
  EXPECT_EQ(info.unique, 30);
  EXPECT_EQ(c.manifest.records, 30);
  EXPECT_EQ(c.manifest.record_shapes,
            (std::vector<std::vector<int64_t>>{{4, kPatternSide, kPatternSide}}));
}

TEST(BuildStages, DuplicatesGiveOneRecord) {
  TempDir dir;
  // Three images, each eight times, interleaved, so copies fall in one chunk and across chunks.
  std::vector<int> p;
  for (int i = 0; i < 24; ++i) p.push_back(i % 3);
  write_pattern_images(dir.path().string(), p);
  const recycle::BuildReport r = build_all(options_for(dir, dir.file("cache"), 5));
  EXPECT_EQ(r.samples, 24);
  EXPECT_EQ(r.unique, 3);
  expect_counts(r, {3, 24, 21, 3});
  const CacheContents c = read_cache(dir.file("cache"));
  EXPECT_EQ(c.records.size(), 3u);
  ASSERT_EQ(c.index.size(), 24u);
  for (size_t i = 3; i < c.index.size(); ++i) EXPECT_EQ(c.index[i].key, c.index[i % 3].key);
}

TEST(BuildStages, SecondRunComputesNothingAndWritesNothing) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(20, 5));
  const std::string cache = dir.file("cache");
  ASSERT_EQ(build_all(options_for(dir, cache)).computed, 20);
  const CacheContents before = read_cache(cache);

  {
    SplitBuild s(options_for(dir, cache));
    start(s);
    EXPECT_TRUE(s.plan().unchanged());
    EXPECT_TRUE(s.plan().todo().empty());
    EXPECT_EQ(s.plan().existing().size(), 25u);
    run_chunks(s);
    EXPECT_EQ(s.writes(), 0);
    const recycle::BuildReport r = s.report();
    expect_counts(r, {0, 0, 25, 20});
    EXPECT_EQ(r.bytes, 0);
  }  // the state is dropped: the store closes

  // run_build agrees, and the cache is as it was.
  const recycle::BuildReport again = recycle::run_build(options_for(dir, cache));
  expect_counts(again, {0, 0, 25, 20});
  EXPECT_EQ(again.bytes, 0);
  const CacheContents after = read_cache(cache);
  EXPECT_EQ(after.manifest.to_json_string(), before.manifest.to_json_string());
  EXPECT_EQ(after.records, before.records);
}

TEST(BuildStages, BuildStoppedMidwayAndResumedEqualsBuildInOneGo) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(40, 8));  // 48 samples, 6 chunks of 8
  const std::string whole = dir.file("whole"), resumed = dir.file("resumed");
  const recycle::BuildReport one_go = recycle::run_build(options_for(dir, whole));
  ASSERT_EQ(one_go.computed, 40);

  int64_t computed_first = 0;
  {
    SplitBuild s(options_for(dir, resumed));
    start(s);
    run_chunks(s, 2);  // 16 samples written, then the state is dropped
    EXPECT_EQ(s.plan().next(), 16u);
    computed_first = s.report().computed;
    EXPECT_EQ(computed_first, 16);
  }
  {
    const CacheContents midway = read_cache(resumed);
    EXPECT_FALSE(midway.manifest.splits.at("train").complete);
    EXPECT_EQ(midway.index.size(), 16u);
    EXPECT_EQ(midway.records.size(), 16u);
    EXPECT_EQ(midway.manifest.records, 16);
  }
  {
    SplitBuild s(options_for(dir, resumed));
    start(s);
    EXPECT_FALSE(s.plan().unchanged());
    ASSERT_EQ(s.plan().todo().size(),
              32u);  // the resume point: what the index holds already is kept
    EXPECT_EQ(s.plan().todo().front(), 16);
    run_chunks(s);
    expect_counts(s.report(), {40 - computed_first, 32, 48 - (40 - computed_first), 40});
  }
  const CacheContents a = read_cache(whole), b = read_cache(resumed);
  EXPECT_EQ(a.records, b.records);  // byte for byte
  ASSERT_EQ(a.index.size(), b.index.size());
  for (size_t i = 0; i < a.index.size(); ++i) EXPECT_EQ(a.index[i], b.index[i]) << i;
  EXPECT_EQ(a.manifest.to_json_string(), b.manifest.to_json_string());
}

TEST(BuildStages, AnotherIdentityIsRefusedWithOneLine) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(10, 0));
  const std::string cache = dir.file("cache");
  build_all(options_for(dir, cache));
  const CacheContents before = read_cache(cache);

  BuildOptions o = options_for(dir, cache);
  o.codec = recycle::Codec::kFp32;
  SplitBuild s(o);
  try {
    s.open();
    FAIL() << "another codec was accepted";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what, "cache " + cache +
                        " was built for another setup: codec: the cache has fp16, "
                        "this run asks for fp32 (use --rebuild to start over)");
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  EXPECT_THROW(s.writes(), std::logic_error);  // refused: the cache was closed again
  const CacheContents after = read_cache(cache);
  EXPECT_EQ(after.manifest.to_json_string(), before.manifest.to_json_string());
}

TEST(BuildStages, ChunkShapeCheckFiresWhenThePrefixDisagreesWithTheManifest) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(10, 0));
  SplitBuild s(options_for(dir, dir.file("cache")));
  start(s);
  s.begin();
  Pieces::encoder(s).set_record_shape({4, 14, 14});  // another prefix's
  BuildChunk chunk;
  ASSERT_TRUE(s.next_chunk(&chunk));
  ASSERT_EQ(chunk.compute_keys.size(), 8u);
  try {
    s.compute(&chunk);
    FAIL() << "the shape check did not fire";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "the prefix made outputs of shape 8x4x28x28, the cache's "
              "records are 4x14x14 per sample");
  }
  EXPECT_TRUE(chunk.records.empty());
  EXPECT_EQ(s.report().computed, 0);
}

}  // namespace

// The same images built in fp32 and in int8 (LZ4 and zstd): the same keys, int8 records of
// C x 8 + numel payload bytes, every value within half its channel's scale of the fp32
// record's, and a zstd cache whose records are the LZ4 cache's byte for byte.
TEST(BuildStages, Int8BuildIsWithinHalfAScaleOfFp32) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(12, 0));
  const std::string exact = dir.file("fp32"), small = dir.file("int8"), zstd = dir.file("zstd");
  BuildOptions o = options_for(dir, exact);
  o.codec = recycle::Codec::kFp32;
  build_all(o);
  o.cache_dir = small;
  o.codec = recycle::Codec::kInt8;
  build_all(o);
  o.cache_dir = zstd;
  o.compression = recycle::Compression::kZstd;
  build_all(o);
  const CacheContents a = read_cache(exact), b = read_cache(small), z = read_cache(zstd);
  EXPECT_EQ(b.manifest.codec, recycle::Codec::kInt8);
  EXPECT_EQ(b.records, z.records);
  ASSERT_EQ(a.records.size(), b.records.size());
  ASSERT_FALSE(a.records.empty());
  for (const auto& [key, fp32_bytes] : a.records) {
    ASSERT_EQ(b.records.count(key), 1u) << key;
    std::vector<recycle::RecordTensor> ta, tb;
    ASSERT_OK(recycle::parse_record(fp32_bytes, &ta));
    ASSERT_OK(recycle::parse_record(b.records.at(key), &tb));
    ASSERT_EQ(ta.size(), 1u);
    ASSERT_EQ(tb.size(), 1u);
    EXPECT_EQ(tb[0].codec, recycle::Codec::kInt8);
    ASSERT_EQ(ta[0].shape, tb[0].shape);
    const size_t n = static_cast<size_t>(ta[0].numel());
    const size_t channels = static_cast<size_t>(ta[0].shape.at(0));
    EXPECT_EQ(tb[0].payload_bytes(), n + 8 * channels);
    std::vector<float> va(n), vb(n);
    recycle::decode_tensor(ta[0], va.data());
    recycle::decode_tensor(tb[0], vb.data());
    const size_t per = n / channels;
    for (size_t c = 0; c < channels; ++c) {
      float lo = va[c * per], hi = va[c * per];
      for (size_t i = c * per; i < (c + 1) * per; ++i) {
        lo = std::min(lo, va[i]);
        hi = std::max(hi, va[i]);
      }
      const double half_scale = (static_cast<double>(hi) - lo) / 255.0 / 2.0;
      const double slack = 1e-6 * (std::fabs(lo) + std::fabs(hi)) + 1e-30;
      for (size_t i = c * per; i < (c + 1) * per; ++i) {
        ASSERT_LE(std::fabs(static_cast<double>(va[i]) - vb[i]), half_scale + slack)
            << key << " channel " << c << " index " << i;
      }
    }
  }
}

namespace {

// run_build starts each chunk's prefix before the chunk before it is encoded, and writes each
// chunk on a ChunkWriter's thread while the next one computes; the cache it leaves must be the
// serial loop's, byte for byte, duplicates across chunks computed once.
TEST(BuildStages, OverlappedWritesLeaveTheCacheTheSerialLoopLeaves) {
  TempDir dir;
  std::vector<int> p;
  for (int i = 0; i < 60; ++i) p.push_back((i * 7) % 23);  // copies within and across chunks
  write_pattern_images(dir.path().string(), p);
  const recycle::BuildReport serial = build_all(options_for(dir, dir.file("serial"), 6));
  const recycle::BuildReport overlapped =
      recycle::run_build(options_for(dir, dir.file("overlapped"), 6));
  expect_counts(overlapped,
                {serial.computed, serial.index_written, serial.skipped, serial.records});
  EXPECT_EQ(overlapped.computed, 23);
  EXPECT_GT(overlapped.prefix_seconds, 0.0);
  EXPECT_LE(overlapped.prefix_seconds, overlapped.seconds);
  const CacheContents a = read_cache(dir.file("serial"));
  const CacheContents b = read_cache(dir.file("overlapped"));
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.records, b.records);
  EXPECT_EQ(a.manifest.records, b.manifest.records);
  EXPECT_EQ(a.manifest.record_bytes, b.manifest.record_bytes);
  EXPECT_TRUE(b.manifest.splits.at("train").complete);
  // The report's JSON carries the prefix's share.
  EXPECT_NE(overlapped.to_json().find("\"prefix_seconds\""), std::string::npos);
  // And where the seconds went: the loop's stages, one after another, within the run's time;
  // the writes on their own thread.
  const recycle::BuildStageSeconds& t = overlapped.stage_seconds;
  for (double v : {t.open, t.lookup, t.read, t.start, t.outputs, t.encode, t.stage, t.write_wait,
                   t.finish, t.write}) {
    EXPECT_GE(v, 0.0);
  }
  EXPECT_GT(t.open, 0.0);
  EXPECT_GT(t.start, 0.0);
  EXPECT_GT(t.write, 0.0);
  EXPECT_LE(t.open + t.lookup + t.read + t.start + t.outputs + t.encode + t.stage + t.write_wait +
                t.finish,
            overlapped.seconds);
  EXPECT_NE(overlapped.to_json().find("\"stage_seconds\""), std::string::npos);
}

// A ChunkWriter hands a write's error to the next submit (or finish), and stops nothing else.
TEST(BuildStages, ChunkWriterRethrowsAWriteError) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(12, 0));
  SplitBuild s(options_for(dir, dir.file("cache"), 4));
  start(s);
  s.begin();
  recycle::SplitWriter& split_writer = Pieces::split(s).writer();
  recycle::StagedWrite w = split_writer.stage();
  split_writer.seal(&w);
  // A batch of another cache: the store refuses it with an error.
  std::unique_ptr<ActivationStore> other;
  ASSERT_OK(ActivationStore::open(dir.file("other"), recycle::StoreOptions(), &other));
  recycle::StoreTestAccess::set_batch(w, std::make_unique<ActivationStore::Batch>(*other));
  recycle::ChunkWriter writer(split_writer, nullptr);
  writer.submit(std::move(w));
  EXPECT_THROW(writer.finish(), std::invalid_argument);  // "batch belongs to another cache"
  writer.finish();                                       // nothing pending any more
}

}  // namespace

namespace {

// The build streams its images: once its inputs are loaded no pixel is in memory, the keys of the
// streamed split are the keys of the split loaded whole, and so is the cache it builds.
TEST(BuildStages, StreamedInputBuildsTheCacheOfTheWholeInput) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(20, 5));
  BuildOptions o = options_for(dir, dir.file("streamed"), 3);
  o.data.classes = "1-8";
  SplitBuild s(o);
  EXPECT_TRUE(Pieces::inputs(s).streamed().streamed());
  EXPECT_TRUE(Pieces::inputs(s).data().pixels.empty());
  s.key_samples();
  const recycle::Dataset whole = recycle::load_dataset(o.data);
  ASSERT_EQ(s.plan().keys().size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    recycle::TensorView view;
    EXPECT_EQ(s.plan().keys()[i], Pieces::inputs(s).keyer().key(whole.key_input(i, &view))) << i;
  }
  s.open();
  run_chunks(s);

  BuildOptions ow = o;
  ow.cache_dir = dir.file("whole");
  SplitBuild w(ow);
  Pieces::inputs(w).use_samples_in_memory(whole);  // pixels in memory: the encoder reads them there
  w.open();
  run_chunks(w);

  const CacheContents a = read_cache(dir.file("streamed"));
  const CacheContents b = read_cache(dir.file("whole"));
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.records, b.records);
  EXPECT_EQ(a.records.size(), 16u);  // patterns 1-8 of 20, plus repeats of 1-4: 16 distinct
}

}  // namespace

namespace {

// run_build reads a streamed split's images a chunk ahead on a ChunkReader's thread (and, on
// a new cache, asks RocksDB nothing in find_missing): the cache it builds is the one the
// stages build one by one from the split held in memory, duplicates across chunks included.
TEST(BuildStages, ReadAheadBuildsTheCacheOfTheStagesRunOneByOne) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(20, 5));
  BuildOptions o = options_for(dir, dir.file("ahead"), 3);
  o.data.classes = "1-8";
  const recycle::BuildReport r = recycle::run_build(o);
  EXPECT_EQ(r.computed, 16);
  EXPECT_EQ(r.samples, 20);

  BuildOptions ow = o;
  ow.cache_dir = dir.file("whole");
  SplitBuild w(ow);
  Pieces::inputs(w).use_samples_in_memory(recycle::load_dataset(o.data));
  w.open();
  EXPECT_FALSE(w.plan().had_records());
  run_chunks(w);

  const CacheContents a = read_cache(dir.file("ahead"));
  const CacheContents b = read_cache(dir.file("whole"));
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.records, b.records);
}

// A ChunkReader serves the chunks next_chunk hands out, in order, and refuses any other.
TEST(BuildStages, ChunkReaderRefusesAChunkOutOfOrder) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(12, 0));
  SplitBuild s(options_for(dir, dir.file("cache"), 4));
  start(s);
  s.begin();
  recycle::ChunkReader reader(Pieces::inputs(s), s.plan().todo(), 0, 4);
  BuildChunk first, second;
  ASSERT_TRUE(s.next_chunk(&first));
  ASSERT_TRUE(s.next_chunk(&second));
  EXPECT_THROW(reader.read(&second), std::logic_error);  // the first was skipped
}

// A rerun on a cache that holds records asks RocksDB which keys it has (had_records).
TEST(BuildStages, ARerunOnACacheWithRecordsLooksThemUp) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(12, 0));
  BuildOptions o = options_for(dir, dir.file("cache"), 4);
  recycle::run_build(o);
  SplitBuild s(o);
  start(s);
  EXPECT_TRUE(s.plan().had_records());
  EXPECT_TRUE(s.plan().unchanged());
}

}  // namespace

namespace {

// The values of a cache's records, decoded, by key.
std::map<std::string, std::vector<float>> decoded_records(const CacheContents& c) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [key, bytes] : c.records) {
    std::vector<recycle::RecordTensor> t;
    EXPECT_TRUE(recycle::parse_record(bytes, &t).ok()) << key;
    if (t.size() != 1) continue;
    std::vector<float> v(static_cast<size_t>(t[0].numel()));
    recycle::decode_tensor(t[0], v.data());
    out[key] = std::move(v);
  }
  return out;
}

// --precision bf16: the prefix runs under autocast; its records are another cache's (the
// precision is identity) and hold the fp32 prefix's values within bfloat16's rounding, not
// the same values.
TEST(BuildStages, Bf16PrefixMakesACacheOfItsOwnWithinBf16OfFp32) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(12, 0));
  BuildOptions o = options_for(dir, dir.file("fp32"));
  o.codec = recycle::Codec::kFp32;
  build_all(o);
  o.cache_dir = dir.file("bf16");
  o.precision = recycle::Precision::kBf16;
  build_all(o);
  const CacheContents a = read_cache(dir.file("fp32")), b = read_cache(dir.file("bf16"));
  EXPECT_TRUE(a.manifest.prefix_precision.empty());
  EXPECT_EQ(b.manifest.prefix_precision, "bf16");
  EXPECT_EQ(a.index, b.index);
  const auto va = decoded_records(a), vb = decoded_records(b);
  ASSERT_EQ(va.size(), 12u);
  ASSERT_EQ(vb.size(), va.size());
  double largest = 0, worst = 0;
  for (const auto& [key, x] : va) {
    const std::vector<float>& y = vb.at(key);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(x[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
    }
  }
  EXPECT_GT(worst, 0.0) << "the bf16 prefix made the fp32 prefix's values exactly";
  EXPECT_LT(worst, 0.05 * largest + 1e-3);

  // The fp32 run asks the bf16 cache for another identity: refused, nothing written.
  o.precision = recycle::Precision::kFp32;
  try {
    build_all(o);
    ADD_FAILURE() << "an fp32 build into a bf16 cache was not refused";
  } catch (const recycle::StaleCacheError& e) {
    EXPECT_NE(
        std::string(e.what()).find("prefix precision: the cache has bf16, this run asks for fp32"),
        std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_cache(dir.file("bf16")).records, b.records);

  // The word a manifest stores, read back; one this version does not know names the cache.
  EXPECT_EQ(recycle::prefix_precision_of(b.manifest, "c"), recycle::Precision::kBf16);
  EXPECT_EQ(recycle::prefix_precision_of(a.manifest, "c"), recycle::Precision::kFp32);
  recycle::Manifest later = b.manifest;
  later.prefix_precision = "fp8";
  EXPECT_THROW(
      {
        try {
          recycle::prefix_precision_of(later, "dir/c");
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("cache dir/c"), std::string::npos) << e.what();
          throw;
        }
      },
      std::runtime_error);
}

// PrefixRunner: runs started one after another finish in that order, each with the outputs a
// run of its own gives; finish without a start and run with one in flight are refused.
TEST(BuildStages, PrefixRunsFinishInTheOrderTheyStarted) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(12, 0));
  SplitBuild s(options_for(dir, dir.file("cache"), 4));
  start(s);
  s.begin();
  std::vector<torch::Tensor> inputs;
  BuildChunk chunk;
  while (s.next_chunk(&chunk)) inputs.push_back(Pieces::encoder(s).inputs(chunk));
  ASSERT_EQ(inputs.size(), 3u);
  recycle::PrefixRunner& p = Pieces::encoder(s).prefix();
  std::vector<torch::Tensor> alone;
  for (const torch::Tensor& in : inputs) alone.push_back(p.run(in));
  for (const torch::Tensor& in : inputs) p.start(in);
  EXPECT_EQ(p.in_flight(), 3u);
  EXPECT_THROW(p.run(inputs[0]), std::logic_error);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const torch::Tensor out = p.finish();
    EXPECT_TRUE(torch::equal(out, alone[i])) << i;
    EXPECT_GT(p.last_seconds(), 0.0);
  }
  EXPECT_EQ(p.in_flight(), 0u);
  EXPECT_THROW(p.finish(), std::logic_error);
}

}  // namespace
