// AOTInductor packages (engine/models/pt2_model.h): what the registry says of pt2:FILE without
// a package. The packages themselves (export, build, train, predict) are tested from Python,
// which makes them: python/tests/test_pt2.py.
#include "engine/models/pt2_model.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "engine/models/block_model.h"
#include "engine/models/encoder_registry.h"
#include "tests/test_util.h"

namespace {

using recycle::testing::TempDir;

// make_encoder's message for spec, or "" when it does not throw std::invalid_argument.
std::string refusal(const std::string& spec) {
  try {
    recycle::make_encoder(spec, 2);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Pt2Model, IsAnEncoderThatTakesAFile) {
  EXPECT_TRUE(recycle::encoder_info("pt2").takes_file);
  EXPECT_TRUE(recycle::is_pt2_path("/a/head.pt2"));
  EXPECT_FALSE(recycle::is_pt2_path("/a/head.safetensors"));
  EXPECT_FALSE(recycle::is_pt2_path(".pt2x"));
}

TEST(Pt2Model, AFileThatIsNoPackageIsRefusedInOneLine) {
  TempDir dir;
  const std::string path = dir.file("prefix.pt2");
  std::ofstream(path) << "not a zip archive";
  const std::string why = refusal("pt2:" + path);
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  if (recycle::pt2_supported()) {
    EXPECT_NE(why.find("is not an AOTInductor package"), std::string::npos) << why;
  } else {
    EXPECT_NE(why.find("torch >= 2.6"), std::string::npos) << why;
    EXPECT_NE(why.find("torchscript:FILE"), std::string::npos) << why;
  }
}

}  // namespace
