// Head files (engine/jobs/head_file.h) and prediction rows (engine/jobs/prediction_rows.h).
#include "recycle/predict.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/jobs/head_file.h"
#include "engine/models/tensor_file.h"
#include "engine/jobs/prediction_rows.h"
#include "engine/models/encoder_registry.h"
#include "recycle/errors.h"
#include "tests/test_util.h"

namespace {

using recycle::HeadFile;
using recycle::HeadIdentity;
using recycle::Manifest;
using recycle::testing::TempDir;

Manifest cache_manifest(const recycle::BlockModel& model, const recycle::SplitModel& split) {
  Manifest m;
  m.identity() = recycle::head_identity_of_model(model, split).identity;
  m.keyer = "xxh3";
  m.codec = recycle::Codec::kFp16;
  m.preprocess = "normalize:mean=0.2860,std=0.3530";
  m.record_shapes = {{8, 14, 14}};
  m.class_names = {"a", "b", "c"};
  return m;
}

struct Model {
  recycle::BlockModel model = recycle::make_encoder("resnet18:width=4,in_channels=1", 3);
  recycle::SplitModel split;
  Model() {
    model.class_names = {"a", "b", "c"};
    split = recycle::split_block_model(model, 4);
  }
};

TEST(HeadFile, SavesAndLoadsTheHeadWithItsCacheIdentity) {
  TempDir dir;
  Model a;
  const Manifest m = cache_manifest(a.model, a.split);
  recycle::save_head(a.split.head, recycle::head_identity_of_cache(m), dir.file("head.pt"));

  HeadFile file(dir.file("head.pt"));
  EXPECT_TRUE(file.identity().from_cache);
  EXPECT_EQ(file.identity().class_names, m.class_names);
  EXPECT_TRUE(m.identity().identity_differences(file.identity().identity).empty());
  EXPECT_TRUE(recycle::head_differences(file.identity(), m).empty());

  Model b;  // other initial weights: loading makes them a's
  file.load_into(b.split.head);
  const auto pa = a.split.head->parameters(), pb = b.split.head->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(pa[i].equal(pb[i])) << i;
}

TEST(HeadFile, AHeadFromAnotherCacheOrPrefixDiffers) {
  TempDir dir;
  Model a;
  const Manifest m = cache_manifest(a.model, a.split);
  HeadIdentity from_cache = recycle::head_identity_of_cache(m);
  Manifest other = m;
  other.codec = recycle::Codec::kInt8;
  EXPECT_EQ(recycle::head_differences(from_cache, other).size(), 1u);
  other = m;
  other.fingerprint = "ff";
  EXPECT_EQ(recycle::head_differences(from_cache, other).size(), 1u);
  other = m;
  other.class_names = {"a", "b", "d"};
  EXPECT_EQ(recycle::head_differences(from_cache, other).size(), 1u);

  // Trained from raw data: its prefix fields alone (and the classes) are compared.
  const HeadIdentity from_data = recycle::head_identity_of_model(a.model, a.split);
  EXPECT_FALSE(from_data.from_cache);
  EXPECT_TRUE(recycle::head_differences(from_data, m).empty());
  other = m;
  other.codec = recycle::Codec::kInt8;
  EXPECT_TRUE(recycle::head_differences(from_data, other).empty());
  other = m;
  other.split_at = "layer3.1";
  other.prefix_blocks = 6;
  EXPECT_FALSE(recycle::head_differences(from_data, other).empty());

  // Round trip of a raw-data head's identity through a file.
  recycle::save_head(a.split.head, from_data, dir.file("h.pt"));
  HeadFile file(dir.file("h.pt"));
  EXPECT_FALSE(file.identity().from_cache);
  EXPECT_EQ(file.identity().identity.fingerprint, from_data.identity.fingerprint);
  EXPECT_EQ(file.identity().identity.prefix_blocks, 4);
}

TEST(HeadFile, RefusesFilesThatAreNotHeadsAndHeadsOfAnotherShape) {
  TempDir dir;
  recycle::testing::write_file(dir.file("junk.pt"), "not a zip");
  EXPECT_THROW(HeadFile(dir.file("junk.pt")), std::runtime_error);
  EXPECT_THROW(HeadFile(dir.file("missing.pt")), std::runtime_error);
  EXPECT_THROW(HeadFile(dir.path().string()), std::runtime_error);  // a directory
  // A zip from LibTorch (an older version's head, or any TorchScript archive): never loaded.
  Model a;
  torch::serialize::OutputArchive archive;
  a.split.head->save(archive);
  archive.save_to(dir.file("old.pt"));
  try {
    HeadFile old(dir.file("old.pt"));
    ADD_FAILURE() << "an archive was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("in the format of an older recycle"), std::string::npos)
        << e.what();
  }
  // A tensor file without the identity entry (a model file, a head from before).
  recycle::TensorFile bare;
  recycle::add_module_state(*a.split.head, &bare);
  recycle::save_tensor_file(bare, dir.file("bare.pt"));
  try {
    HeadFile read(dir.file("bare.pt"));
    ADD_FAILURE() << "a head without its identity was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a head file with an identity"), std::string::npos)
        << e.what();
  }
  // A head of 3 classes into a head of 5: refused, not silently reshaped.
  recycle::save_head(a.split.head, recycle::head_identity_of_model(a.model, a.split),
                     dir.file("h3.pt"));
  recycle::BlockModel five = recycle::make_encoder("resnet18:width=4,in_channels=1", 5);
  recycle::SplitModel split5 = recycle::split_block_model(five, 4);
  HeadFile h3(dir.file("h3.pt"));
  EXPECT_THROW(h3.load_into(split5.head), std::runtime_error);
}

recycle::Dataset three_samples() {
  recycle::Dataset d;
  d.labels = {0, 2, 1};
  d.ids = {"x/0", "dir/a,b.png", "say \"hi\""};
  return d;
}

TEST(PredictionRows, CsvQuotesFieldsAndWritesTopK) {
  const recycle::Dataset d = three_samples();
  const torch::Tensor probs = torch::tensor({0.7f, 0.2f, 0.1f, 0.1f, 0.3f, 0.6f}).view({2, 3});
  const torch::Tensor pred = probs.argmax(1);
  std::ostringstream out;
  recycle::RowWriter rows(out, recycle::OutputFormat::kCsv, {"a", "b,c", "d"}, 2);
  rows.write(1, d, probs, pred, {0, 1}, {-1, 0});  // sample 1 a hit, sample 2 a miss
  EXPECT_EQ(out.str(),
            "row,id,label,pred,class,hit,top1,p1,top2,p2\n"
            "1,\"dir/a,b.png\",2,0,a,true,0,0.7,1,0.2\n"
            "2,\"say \"\"hi\"\"\",1,2,d,false,2,0.6,1,0.3\n");
}

TEST(PredictionRows, JsonlRowsHoldEveryProbability) {
  const recycle::Dataset d = three_samples();
  const torch::Tensor probs = torch::tensor({0.25f, 0.5f, 0.25f}).view({1, 3});
  std::ostringstream out;
  recycle::RowWriter rows(out, recycle::OutputFormat::kJsonl, {"a", "b\"", "d"}, 0);
  rows.write(0, d, probs, probs.argmax(1), {0}, {-1});
  EXPECT_EQ(out.str(),
            "{\"row\":0,\"id\":\"x/0\",\"label\":0,\"pred\":1,\"class\":\"b\\\"\",\"hit\":true,"
            "\"probs\":[0.25,0.5,0.25]}\n");
  const nlohmann::json row = nlohmann::json::parse(out.str());
  EXPECT_EQ(row["class"], "b\"");
}

TEST(PredictOptions, ValidateNamesTheFlag) {
  recycle::PredictOptions o;
  o.cache_dir = "c";
  o.head = "h.pt";
  o.weights = "w.pt";
  o.data.spec = "fashion-mnist";
  o.out = "p.JSONL";
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.data.split, "test");
  EXPECT_EQ(recycle::output_format("p.CSV"), recycle::OutputFormat::kCsv);
  auto refused = [](recycle::PredictOptions p, const std::string& flag) {
    try {
      p.validate();
      ADD_FAILURE() << "accepted, expected a complaint about " << flag;
    } catch (const recycle::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  recycle::PredictOptions p = o;
  p.out = "p.txt";
  refused(p, "--out");
  p = o;
  p.head.clear();
  refused(p, "--head");
  p = o;
  p.weights.clear();  // the file the cache records, when it records one (run_predict decides)
  EXPECT_NO_THROW(p.validate());
  p = o;
  p.batch = 0;
  refused(p, "--batch");
  p = o;
  p.top_k = -1;
  refused(p, "--top-k");
}

}  // namespace
