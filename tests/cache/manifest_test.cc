// Tests for cache/manifest.h: the JSON round trip, identity comparison, and the statuses
// from_json_string gives for damaged or foreign manifests.
#include "cache/manifest.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "recycle/status.h"
#include "tests/test_util.h"

namespace {

recycle::Manifest full_manifest() {
  recycle::Manifest m;
  m.model = "resnet18:width=16,in_channels=1";
  m.fingerprint = "0123456789abcdef0123456789abcdef";
  m.split_at = "layer2.1";
  m.prefix_blocks = 4;
  m.total_blocks = 8;
  m.keyer = "xxh3";
  m.codec = recycle::Codec::kFp16;
  m.preprocess = "normalize:mean=0.2860,std=0.3530";
  m.record_shapes = {{32, 7, 7}, {1}};
  m.class_names = {"sandal", "shirt", "sneaker", "bag", "ankle boot"};
  m.classifier = "new";
  m.splits["train"] = {"fashion-mnist:/data/fm", 30000, 29876, true};
  m.splits["test-2"] = {"tsv:/tmp/a \"quoted\"\tfile.tsv", 5000, 4999, false};
  m.records = 34875;
  m.record_bytes = int64_t{1} << 40;
  return m;
}

void expect_same_manifest(const recycle::Manifest& a, const recycle::Manifest& b) {
  EXPECT_EQ(a.format_version, b.format_version);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.split_at, b.split_at);
  EXPECT_EQ(a.prefix_blocks, b.prefix_blocks);
  EXPECT_EQ(a.total_blocks, b.total_blocks);
  EXPECT_EQ(a.keyer, b.keyer);
  EXPECT_EQ(a.codec, b.codec);
  EXPECT_EQ(a.preprocess, b.preprocess);
  EXPECT_EQ(a.record_shapes, b.record_shapes);
  EXPECT_EQ(a.class_names, b.class_names);
  EXPECT_EQ(a.classifier, b.classifier);
  EXPECT_EQ(a.records, b.records);
  EXPECT_EQ(a.record_bytes, b.record_bytes);
  ASSERT_EQ(a.splits.size(), b.splits.size());
  for (const auto& [name, info] : a.splits) {
    const auto it = b.splits.find(name);
    ASSERT_NE(it, b.splits.end()) << name;
    EXPECT_EQ(info.data, it->second.data) << name;
    EXPECT_EQ(info.samples, it->second.samples) << name;
    EXPECT_EQ(info.unique, it->second.unique) << name;
    EXPECT_EQ(info.complete, it->second.complete) << name;
    EXPECT_EQ(info.classes, it->second.classes) << name;
    EXPECT_TRUE(info.shard == it->second.shard) << name;
  }
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

recycle::Status parse(const std::string& text) {
  recycle::Manifest m;
  return recycle::Manifest::from_json_string(text, &m);
}

}  // namespace

TEST(Manifest, Defaults) {
  const recycle::Manifest m;
  EXPECT_EQ(m.format_version, recycle::kCacheFormatVersion);
  EXPECT_EQ(recycle::kCacheFormatVersion, 1);
  EXPECT_EQ(m.recycle_ratio(), 0.0);
  EXPECT_TRUE(m.splits.empty());
  EXPECT_EQ(full_manifest().recycle_ratio(), 0.5);
}

TEST(Manifest, JsonRoundTripOfAFullyPopulatedManifest) {
  const recycle::Manifest m = full_manifest();
  for (int indent : {2, -1, 0}) {
    const std::string text = m.to_json_string(indent);
    recycle::Manifest back;
    ASSERT_OK(recycle::Manifest::from_json_string(text, &back));
    expect_same_manifest(back, m);
    EXPECT_TRUE(m.identity_differences(back).empty());
    EXPECT_EQ(back.to_json_string(indent), text) << "re-encoding is stable";
  }
  // Pretty by default, one line with indent -1.
  EXPECT_NE(m.to_json_string().find('\n'), std::string::npos);
  EXPECT_EQ(m.to_json_string(-1).find('\n'), std::string::npos);

  // The JSON carries the documented field names and values.
  const nlohmann::json j = nlohmann::json::parse(m.to_json_string());
  EXPECT_EQ(j.at("format_version"), 1);
  EXPECT_EQ(j.at("model"), "resnet18:width=16,in_channels=1");
  EXPECT_EQ(j.at("split_at"), "layer2.1");
  EXPECT_EQ(j.at("prefix_blocks"), 4);
  EXPECT_EQ(j.at("total_blocks"), 8);
  EXPECT_EQ(j.at("codec"), "fp16");
  EXPECT_EQ(j.at("record_bytes"), int64_t{1} << 40);
  EXPECT_EQ(j.at("splits").size(), 2u);
  EXPECT_EQ(j.at("splits").at("train").at("samples"), 30000);
  EXPECT_EQ(j.at("splits").at("train").at("complete"), true);
  EXPECT_EQ(j.at("splits").at("test-2").at("unique"), 4999);
  EXPECT_EQ(j.at("record_shapes"), nlohmann::json::parse("[[32, 7, 7], [1]]"));
}

TEST(Manifest, EmptyManifestRoundTrips) {
  const recycle::Manifest m;
  recycle::Manifest back = full_manifest();
  ASSERT_OK(recycle::Manifest::from_json_string(m.to_json_string(), &back));
  expect_same_manifest(back, m);
}

TEST(Manifest, IdentityDifferencesEmptyForEqualIdentity) {
  const recycle::Manifest a = full_manifest();
  const recycle::Manifest b = full_manifest();
  EXPECT_TRUE(a.identity_differences(b).empty());
  EXPECT_TRUE(recycle::Manifest().identity_differences(recycle::Manifest()).empty());
}

TEST(Manifest, IdentityDifferencesNameTheField) {
  struct Case {
    const char* field;
    void (*change)(recycle::Manifest*);
    const char* have;
    const char* want;
  };
  const Case cases[] = {
      {"model", [](recycle::Manifest* m) { m->model = "transformer:layers=4"; },
       "resnet18:width=16,in_channels=1", "transformer:layers=4"},
      {"fingerprint", [](recycle::Manifest* m) { m->fingerprint = "ffff"; },
       "0123456789abcdef0123456789abcdef", "ffff"},
      {"split point", [](recycle::Manifest* m) { m->split_at = "layer3.1"; }, "layer2.1",
       "layer3.1"},
      {"split point", [](recycle::Manifest* m) { m->prefix_blocks = 6; }, "4/8", "6/8"},
      {"split point", [](recycle::Manifest* m) { m->total_blocks = 12; }, "4/8", "4/12"},
      {"keyer", [](recycle::Manifest* m) { m->keyer = "text:space"; }, "xxh3", "text:space"},
      {"codec", [](recycle::Manifest* m) { m->codec = recycle::Codec::kFp32; }, "fp16", "fp32"},
      {"preprocessing", [](recycle::Manifest* m) { m->preprocess = "none"; },
       "normalize:mean=0.2860,std=0.3530", "none"},
  };
  const recycle::Manifest cache = full_manifest();
  for (const Case& c : cases) {
    recycle::Manifest run = full_manifest();
    c.change(&run);
    const std::vector<std::string> diffs = cache.identity_differences(run);
    ASSERT_EQ(diffs.size(), 1u) << c.field;
    const std::string& line = diffs[0];
    // "<field ...>: the cache has <have ...>, this run asks for <want ...>"
    const size_t colon = line.find(": the cache has ");
    const size_t comma = line.find(", this run asks for ");
    ASSERT_NE(colon, std::string::npos) << line;
    ASSERT_NE(comma, std::string::npos) << line;
    EXPECT_TRUE(contains(line.substr(0, colon), c.field)) << line;
    EXPECT_TRUE(contains(line.substr(colon, comma - colon), c.have)) << line;
    EXPECT_TRUE(contains(line.substr(comma), c.want)) << line;
  }
  // The documented example, exactly.
  recycle::Manifest run = full_manifest();
  run.codec = recycle::Codec::kFp32;
  EXPECT_EQ(cache.identity_differences(run),
            (std::vector<std::string>{"codec: the cache has fp16, this run asks for fp32"}));
}

TEST(Manifest, SeveralDifferencesGiveOneLineEach) {
  const recycle::Manifest cache = full_manifest();
  recycle::Manifest run = full_manifest();
  run.model = "transformer";
  run.keyer = "id";
  run.codec = recycle::Codec::kBf16;
  const std::vector<std::string> diffs = cache.identity_differences(run);
  ASSERT_EQ(diffs.size(), 3u);
  EXPECT_TRUE(contains(diffs[0], "model"));
  EXPECT_TRUE(contains(diffs[1], "keyer: the cache has xxh3, this run asks for id"));
  EXPECT_TRUE(contains(diffs[2], "codec: the cache has fp16, this run asks for bf16"));
  // Symmetric in the fields it names.
  EXPECT_EQ(run.identity_differences(cache).size(), 3u);
}

TEST(Manifest, ContentsDoNotCountAsIdentity) {
  const recycle::Manifest cache = full_manifest();
  recycle::Manifest run = full_manifest();
  run.splits.clear();
  run.splits["other"] = {"tsv:x", 1, 1, false};
  run.records = 1;
  run.record_bytes = 2;
  run.class_names = {"a"};
  run.classifier = "pretrained";
  EXPECT_TRUE(cache.identity_differences(run).empty());
  EXPECT_TRUE(recycle::Manifest().identity_differences(run).size() > 0u);
}

TEST(Manifest, GarbageIsCorruption) {
  for (const std::string text : {"", "garbage", "{", "{\"format_version\": 1,", "null", "[]", "42",
                                 "\"manifest\"", "{\"format_version\": \"1\"}", "{}"}) {
    const recycle::Status st = parse(text);
    EXPECT_TRUE(st.is_corruption()) << "'" << text << "': " << st.to_string();
  }
}

TEST(Manifest, EveryMissingFieldIsCorruption) {
  const nlohmann::json full = nlohmann::json::parse(full_manifest().to_json_string());
  size_t checked = 0;
  for (const auto& item : full.items()) {
    if (item.key() == "record_layout") continue;  // optional: derived when missing (below)
    nlohmann::json j = full;
    j.erase(item.key());
    const recycle::Status st = parse(j.dump());
    EXPECT_TRUE(st.is_corruption()) << item.key() << ": " << st.to_string();
    ++checked;
  }
  EXPECT_EQ(checked, 15u);
  for (const char* field : {"data", "samples", "unique", "complete"}) {
    nlohmann::json j = full;
    j["splits"]["train"].erase(field);
    EXPECT_TRUE(parse(j.dump()).is_corruption()) << field;
  }
  // A field of the wrong type.
  for (const char* field :
       {"model", "prefix_blocks", "record_shapes", "record_layout", "class_names", "splits"}) {
    nlohmann::json j = full;
    j[field] = nlohmann::json::array({true});
    EXPECT_TRUE(parse(j.dump()).is_corruption()) << field;
  }
}

TEST(Manifest, ImpossibleSplitPointIsCorruption) {
  const auto with_blocks = [](int64_t prefix, int64_t total) {
    recycle::Manifest m = full_manifest();
    m.prefix_blocks = prefix;
    m.total_blocks = total;
    return m.to_json_string();
  };
  for (const auto& [prefix, total] :
       std::vector<std::pair<int64_t, int64_t>>{{9, 8}, {-1, 8}, {0, -1}, {-2, -1}, {1, 0}}) {
    const recycle::Status st = parse(with_blocks(prefix, total));
    EXPECT_TRUE(st.is_corruption()) << prefix << "/" << total;
    EXPECT_TRUE(contains(st.message(), "split point")) << st.message();
  }
  for (const auto& [prefix, total] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {0, 8}, {8, 8}, {2, 8}}) {
    EXPECT_OK(parse(with_blocks(prefix, total)));
  }
}

TEST(Manifest, OtherFormatVersionIsMismatch) {
  for (int version : {0, 2, 99}) {
    recycle::Manifest m = full_manifest();
    m.format_version = version;
    const recycle::Status st = parse(m.to_json_string());
    EXPECT_TRUE(st.is_mismatch()) << version << ": " << st.to_string();
    EXPECT_TRUE(contains(st.message(), std::to_string(version))) << st.message();
  }
  // Mismatch even when the rest is of a layout this build does not know.
  EXPECT_TRUE(parse("{\"format_version\": 2, \"something\": \"else\"}").is_mismatch());
}

// Found by the manifest fuzzer: numbers that are floats or out of int64's range must be
// refused as corruption, not cast (which is undefined behaviour).
TEST(Manifest, NonIntegerOrHugeCountsAreCorruption) {
  recycle::Manifest m;
  m.model = "resnet18:width=16,in_channels=1";
  m.prefix_blocks = 4;
  m.total_blocks = 8;
  const std::string good = m.to_json_string(-1);  // compact: "records":0
  for (const std::string& bad : {std::string("1e300"), std::string("-1e300"), std::string("2.5"),
                                 std::string("18446744073709551615")}) {
    std::string text = good;
    const std::string field = "\"records\":0";
    const size_t at = text.find(field);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, field.size(), "\"records\":" + bad);
    recycle::Manifest out;
    const recycle::Status st = recycle::Manifest::from_json_string(text, &out);
    EXPECT_TRUE(st.is_corruption()) << bad << ": " << st.to_string();
  }
}

// ---------------------------------------------------------------------------------------------
// Record layout

namespace {

// A text cache's manifest: hidden states fp16 of variable length, lengths, a mask.
recycle::Manifest text_manifest() {
  recycle::Manifest m = full_manifest();
  m.record_layout = {{"hidden", recycle::Dtype::kFloat32, {-1, 768}, recycle::Codec::kFp16},
                     {"lengths", recycle::Dtype::kInt64, {1}},
                     {"mask", recycle::Dtype::kBool, {-1}}};
  m.record_shapes = recycle::layout_shapes(m.record_layout);
  return m;
}

// full_manifest() with one record tensor, as JSON written by the code before layouts.
std::string old_manifest_json() {
  recycle::Manifest m = full_manifest();
  m.record_shapes = {{32, 7, 7}};
  nlohmann::json j = nlohmann::json::parse(m.to_json_string());
  j.erase("record_layout");
  return j.dump(2);
}

}  // namespace

TEST(Manifest, LayoutJsonShape) {
  const recycle::Manifest m = text_manifest();
  const nlohmann::json j = nlohmann::json::parse(m.to_json_string());
  EXPECT_EQ(j.at("record_layout"), nlohmann::json::parse(R"([
      {"name": "hidden", "dtype": "float32", "shape": [-1, 768], "codec": "fp16"},
      {"name": "lengths", "dtype": "int64", "shape": [1], "codec": "raw"},
      {"name": "mask", "dtype": "bool", "shape": [-1], "codec": "raw"}])"));
  EXPECT_EQ(j.at("record_shapes"), nlohmann::json::parse("[[-1, 768], [1], [-1]]"));
  EXPECT_EQ(j.at("codec"), "fp16");
  recycle::Manifest back;
  ASSERT_OK(recycle::Manifest::from_json_string(m.to_json_string(), &back));
  EXPECT_EQ(back.record_layout, m.record_layout);
  EXPECT_EQ(back.record_shapes, m.record_shapes);
  EXPECT_TRUE(back.identity_differences(m).empty());
  EXPECT_EQ(back.to_json_string(), m.to_json_string());

  // A manifest built in memory with record_shapes alone writes the derived layout.
  const nlohmann::json f = nlohmann::json::parse(full_manifest().to_json_string());
  EXPECT_EQ(f.at("record_layout"), nlohmann::json::parse(R"([
      {"name": "activation", "dtype": "float32", "shape": [32, 7, 7], "codec": "fp16"},
      {"name": "tensor1", "dtype": "float32", "shape": [1], "codec": "fp16"}])"));
}

TEST(Manifest, OldManifestWithoutLayoutGetsOneAndTheSameIdentity) {
  const std::string old_json = old_manifest_json();
  ASSERT_EQ(old_json.find("record_layout"), std::string::npos);
  recycle::Manifest old;
  ASSERT_OK(recycle::Manifest::from_json_string(old_json, &old));
  EXPECT_EQ(old.record_shapes, (std::vector<std::vector<int64_t>>{{32, 7, 7}}));
  const recycle::RecordLayout want = {
      {"activation", recycle::Dtype::kFloat32, {32, 7, 7}, recycle::Codec::kFp16}};
  EXPECT_EQ(old.record_layout, want);
  EXPECT_EQ(old.layout(), want);

  // A new manifest with the same single float tensor, set through the layout.
  recycle::Manifest now = full_manifest();
  now.record_shapes.clear();
  now.record_layout = want;
  EXPECT_TRUE(old.identity_differences(now).empty());
  EXPECT_TRUE(now.identity_differences(old).empty());
  // One identity, one digest: whether the layout was stored or derived does not count.
  EXPECT_EQ(old.identity().digest(), now.identity().digest());
  // Written again, it carries the layout and still the shapes.
  const nlohmann::json j = nlohmann::json::parse(old.to_json_string());
  EXPECT_EQ(j.at("record_layout").size(), 1u);
  EXPECT_EQ(j.at("record_shapes"), nlohmann::json::parse("[[32, 7, 7]]"));
  // An old manifest's record shapes are positive: -1 there is corruption.
  nlohmann::json bad = nlohmann::json::parse(old_json);
  bad["record_shapes"] = nlohmann::json::parse("[[-1, 7, 7]]");
  EXPECT_TRUE(parse(bad.dump()).is_corruption());
}

TEST(Manifest, LayoutDifferenceIsNamedInOneLine) {
  const recycle::Manifest cache = text_manifest();
  struct Case {
    void (*change)(recycle::Manifest*);
  };
  const Case cases[] = {
      {[](recycle::Manifest* m) { m->record_layout[1].name = "length"; }},
      {[](recycle::Manifest* m) { m->record_layout[1].dtype = recycle::Dtype::kInt32; }},
      {[](recycle::Manifest* m) {
        m->record_layout[0].shape = {-1, 512};
      }},
      {[](recycle::Manifest* m) {
        m->record_layout[0].shape = {128, 768};
      }},  // fixed vs variable
      {[](recycle::Manifest* m) { m->record_layout[0].codec = recycle::Codec::kBf16; }},
      {[](recycle::Manifest* m) { m->record_layout.pop_back(); }},
  };
  for (const Case& c : cases) {
    recycle::Manifest run = text_manifest();
    c.change(&run);
    const std::vector<std::string> diffs = cache.identity_differences(run);
    ASSERT_EQ(diffs.size(), 1u) << recycle::layout_string(run.record_layout);
    EXPECT_EQ(diffs[0], "record layout: the cache has " +
                            recycle::layout_string(cache.record_layout) + ", this run asks for " +
                            recycle::layout_string(run.record_layout));
  }
  // The single activation of an image cache, e.g. another prefix's output.
  recycle::Manifest a = full_manifest(), b = full_manifest();
  a.record_shapes = {{64, 7, 7}};
  b.record_shapes = {{64, 14, 14}};
  EXPECT_EQ(
      a.identity_differences(b),
      (std::vector<std::string>{"record layout: the cache has activation float32 64x7x7 fp16, "
                                "this run asks for activation float32 64x14x14 fp16"}));
  // A codec change alone is the codec line only, layout set or derived.
  for (recycle::Manifest m : {full_manifest(), text_manifest()}) {
    recycle::Manifest run = m;
    run.codec = recycle::Codec::kFp32;
    for (auto& t : run.record_layout) {
      if (t.dtype == recycle::Dtype::kFloat32) t.codec = recycle::Codec::kFp32;
    }
    EXPECT_EQ(m.identity_differences(run),
              (std::vector<std::string>{"codec: the cache has fp16, this run asks for fp32"}));
  }
}

TEST(Manifest, BadLayoutsAreCorruption) {
  const nlohmann::json good = nlohmann::json::parse(text_manifest().to_json_string());
  ASSERT_OK(parse(good.dump()));
  struct Case {
    void (*change)(nlohmann::json*);
    const char* says;
  };
  const Case cases[] = {
      {[](nlohmann::json* j) { (*j)["record_layout"][1]["dtype"] = "int8"; },
       "unknown dtype 'int8'"},
      {[](nlohmann::json* j) { (*j)["record_layout"][1]["codec"] = "fp16"; },
       "codec 'fp16' does not fit dtype int64"},
      {[](nlohmann::json* j) { (*j)["record_layout"][0]["codec"] = "raw"; },
       "codec 'raw' does not fit dtype float32"},
      {[](nlohmann::json* j) { (*j)["record_layout"][0].erase("codec"); }, "dtype float32"},
      {[](nlohmann::json* j) {
         (*j)["record_layout"][0]["shape"] = {-2, 768};
       },
       "not positive integers or -1"},
      {[](nlohmann::json* j) { (*j)["record_layout"][2]["name"] = "hidden"; }, "name repeated"},
      {[](nlohmann::json* j) { (*j)["record_layout"][0].erase("name"); }, "manifest"},
      {[](nlohmann::json* j) { (*j)["record_layout"] = "activation"; }, "not a list"},
      {[](nlohmann::json* j) { (*j)["record_layout"][0] = 3; }, "not an object"},
      {[](nlohmann::json* j) {
         (*j)["record_shapes"][0] = {-1, 512};
       },
       "record_shapes disagree with record_layout"},
      {[](nlohmann::json* j) { (*j)["record_shapes"].erase(2); },
       "record_shapes disagree with record_layout"},
      {[](nlohmann::json* j) { (*j)["record_shapes"][1] = {-3}; }, "record shape"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.change(&j);
    const recycle::Status st = parse(j.dump());
    EXPECT_TRUE(st.is_corruption()) << c.says << ": " << st.to_string();
    EXPECT_TRUE(contains(st.message(), c.says)) << st.message();
  }
  // An exact tensor may leave its codec out or empty: it reads as "raw".
  for (bool erase : {true, false}) {
    nlohmann::json j = good;
    if (erase) {
      j["record_layout"][1].erase("codec");
    } else {
      j["record_layout"][1]["codec"] = "";
    }
    recycle::Manifest m;
    ASSERT_OK(recycle::Manifest::from_json_string(j.dump(), &m));
    EXPECT_EQ(m.record_layout[1].codec_word(), "raw");
  }
  // An old manifest whose codec cannot describe its records.
  nlohmann::json old = nlohmann::json::parse(old_manifest_json());
  old["codec"] = "int4";
  EXPECT_TRUE(
      contains(parse(old.dump()).message(), "the codec 'int4' is not one this version knows"));
}

// The identity is its own value: the manifest's JSON is the identity's fields plus the
// contents', the digest survives the JSON round trip and changes with every identity field
// (the input shape and the layout included) but with no contents field.
TEST(CacheIdentity, DigestFollowsTheIdentityAndOnlyIt) {
  recycle::Manifest m = full_manifest();
  m.input_shape = {1, 28, 28};
  const std::string digest = m.identity().digest();
  EXPECT_EQ(digest.size(), 32u);
  recycle::Manifest back;
  ASSERT_OK(recycle::Manifest::from_json_string(m.to_json_string(), &back));
  EXPECT_EQ(back.identity().digest(), digest);

  nlohmann::json fields;
  m.identity().to_json(&fields);
  recycle::CacheIdentity alone;
  ASSERT_OK(recycle::CacheIdentity::from_json(fields, &alone));
  EXPECT_EQ(alone.digest(), digest);
  EXPECT_TRUE(alone.identity_differences(m).empty());
  const nlohmann::json whole = nlohmann::json::parse(m.to_json_string());
  for (const auto& [key, value] : fields.items()) EXPECT_EQ(whole.at(key), value) << key;
  EXPECT_EQ(whole.size(), fields.size() + 5u);  // class_names, classifier, records, bytes, splits

  recycle::Manifest contents = m;
  contents.records = 1;
  contents.class_names.clear();
  contents.splits.clear();
  EXPECT_EQ(contents.identity().digest(), digest);

  std::vector<recycle::Manifest> others(8, m);
  others[0].model = "resnet18:width=8";
  others[1].fingerprint = "ff";
  others[2].split_at = "layer3.0";
  others[3].prefix_blocks = 5;
  others[4].codec = recycle::Codec::kFp32;
  others[5].input_shape = {3, 32, 32};
  others[6].record_shapes = {{32, 7, 7}, {2}};
  others[7].keyer = "dhash";
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_NE(others[i].identity().digest(), digest) << i;
    EXPECT_FALSE(others[i].identity_differences(m).empty()) << i;
  }
}

namespace {

// A prefix run under autocast makes another cache: the precision is identity, written and
// digested only when it is not fp32, so every cache made before the field existed keeps its
// JSON and its digest (a cache level's directory name).
TEST(CacheIdentity, PrefixPrecisionIsIdentityAndFp32IsWrittenAsBefore) {
  const recycle::Manifest fp32 = full_manifest();
  const nlohmann::json plain = nlohmann::json::parse(fp32.to_json_string());
  EXPECT_FALSE(plain.contains("prefix_precision"));

  recycle::Manifest bf16 = fp32;
  bf16.prefix_precision = "bf16";
  const nlohmann::json marked = nlohmann::json::parse(bf16.to_json_string());
  EXPECT_EQ(marked.at("prefix_precision"), "bf16");
  recycle::Manifest back;
  ASSERT_OK(recycle::Manifest::from_json_string(bf16.to_json_string(), &back));
  EXPECT_EQ(back.prefix_precision, "bf16");
  EXPECT_EQ(back.identity().digest(), bf16.identity().digest());
  EXPECT_NE(bf16.identity().digest(), fp32.identity().digest());
  EXPECT_EQ(fp32.prefix_precision_name(), "fp32");  // the empty precision's word
  EXPECT_EQ(bf16.prefix_precision_name(), "bf16");
  EXPECT_EQ(
      bf16.identity().identity_differences(fp32),
      (std::vector<std::string>{"prefix precision: the cache has bf16, this run asks for fp32"}));

  // The digest of an fp32 identity hashes no precision: one made with the field empty is the
  // one a manifest without the field reads back as.
  nlohmann::json without = marked;
  without.erase("prefix_precision");
  ASSERT_OK(recycle::Manifest::from_json_string(without.dump(), &back));
  EXPECT_TRUE(back.prefix_precision.empty());
  EXPECT_EQ(back.identity().digest(), fp32.identity().digest());

  nlohmann::json empty = marked;
  empty["prefix_precision"] = "";
  EXPECT_TRUE(recycle::Manifest::from_json_string(empty.dump(), &back).is_corruption());
}

// The --classes a split was built with: written when given (left out otherwise), read back, and
// for a manifest written before the field existed, read from its data description once.
TEST(Manifest, SplitClassesAreStoredAndOldManifestsGetThemFromTheDescription) {
  recycle::Manifest m = full_manifest();
  m.splits["train"].data = "fashion-mnist split=train classes=5-9 limit=16";
  m.splits["train"].classes = "5-9";
  nlohmann::json j = nlohmann::json::parse(m.to_json_string());
  EXPECT_EQ(j["splits"]["train"]["classes"], "5-9");
  EXPECT_FALSE(j["splits"]["test-2"].contains("classes"));
  recycle::Manifest back;
  ASSERT_OK(recycle::Manifest::from_json_string(j.dump(), &back));
  expect_same_manifest(m, back);

  j["splits"]["train"].erase("classes");  // as a cache made before the field wrote it
  ASSERT_OK(recycle::Manifest::from_json_string(j.dump(), &back));
  EXPECT_EQ(back.splits.at("train").classes, "5-9");
  EXPECT_EQ(back.splits.at("test-2").classes, "");
  j["splits"]["train"]["data"] = "fashion-mnist split=train classes=0,2";  // at the end
  ASSERT_OK(recycle::Manifest::from_json_string(j.dump(), &back));
  EXPECT_EQ(back.splits.at("train").classes, "0,2");

  j["splits"]["train"]["classes"] = "1-3";  // the stored field, not the description
  ASSERT_OK(recycle::Manifest::from_json_string(j.dump(), &back));
  EXPECT_EQ(back.splits.at("train").classes, "1-3");
}

TEST(Manifest, AShardIsStoredWithItsSplitAndAnImpossibleOneIsCorruption) {
  recycle::Manifest m = full_manifest();
  recycle::SplitShard& shard = m.splits["train"].shard;
  shard.index = 1;
  shard.count = 3;
  shard.rule = "xxh3_64(key) % count";
  shard.split_samples = m.splits["train"].samples * 3;
  nlohmann::json j = nlohmann::json::parse(m.to_json_string());
  EXPECT_EQ(j["splits"]["train"]["shard"]["count"], 3);
  EXPECT_FALSE(j["splits"]["test-2"].contains("shard"));  // a whole split says nothing
  recycle::Manifest back;
  ASSERT_OK(recycle::Manifest::from_json_string(j.dump(), &back));
  expect_same_manifest(m, back);
  EXPECT_FALSE(back.splits.at("test-2").shard.sharded());
  for (const auto& [field, value] : std::vector<std::pair<std::string, int64_t>>{
           {"index", 3}, {"index", -1}, {"count", 0}, {"split_samples", 1}}) {
    nlohmann::json bad = j;
    bad["splits"]["train"]["shard"][field] = value;
    const recycle::Status st = parse(bad.dump());
    EXPECT_TRUE(st.is_corruption()) << field << " " << value;
    EXPECT_TRUE(contains(st.message(), "split train is shard")) << st.message();
  }
}

}  // namespace
