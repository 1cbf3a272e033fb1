// The public surface (include/recycle/): every header compiles alone against include/ only (the
// target recycle_public_headers compiles one translation unit per header through the target
// `recycle`, and recycle_tests depends on it), includes no header of the rooms (cache/, engine/,
// keyers/, base/), and none of them brings in LibTorch.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include "tests/test_paths.h"

namespace {

namespace fs = std::filesystem;

const fs::path kSource = recycle::testing::kSourceDir;

// The project's file an `#include "X"` or `#include <X>` names, or "" for one from elsewhere.
fs::path project_file(const std::string& name) {
  for (const fs::path& root : {kSource, kSource / "include"}) {
    if (fs::is_regular_file(root / name)) return root / name;
  }
  return {};
}

// Every header `path` includes, followed through the project's own headers. *chain records,
// for each header reached, the header that included it.
void includes_of(const fs::path& path, std::set<std::string>* seen, std::vector<std::string>* all,
                 std::map<std::string, std::string>* chain) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t hash = line.find_first_not_of(" \t");
    if (hash == std::string::npos || line.compare(hash, 8, "#include") != 0) continue;
    const size_t open = line.find_first_of("<\"", hash + 8);
    if (open == std::string::npos) continue;
    const size_t close = line.find_first_of(">\"", open + 1);
    if (close == std::string::npos) continue;
    const std::string name = line.substr(open + 1, close - open - 1);
    if (!seen->insert(name).second) continue;
    all->push_back(name);
    (*chain)[name] = path.lexically_relative(kSource).string();
    const fs::path file = project_file(name);
    if (!file.empty()) includes_of(file, seen, all, chain);
  }
}

std::vector<fs::path> public_headers() {
  std::vector<fs::path> headers;
  for (const auto& entry : fs::directory_iterator(kSource / "include" / "recycle")) {
    if (entry.path().extension() == ".h") headers.push_back(entry.path());
  }
  return headers;
}

TEST(PublicHeaders, AreTheSixteenOfTheSurface) {
  std::set<std::string> names;
  for (const fs::path& h : public_headers()) names.insert(h.filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"build.h", "cache.h", "content_hasher.h", "errors.h",
                                          "formats.h", "key.h", "keyer.h", "keys_digest.h",
                                          "manifest.h", "options.h", "predict.h", "reader.h",
                                          "reshard.h", "status.h", "train.h", "writer.h"}));
}

// A public header includes the project's public headers only (the rooms' types it shows are
// defined in include/recycle/ and included from there by the rooms).
TEST(PublicHeaders, IncludeOnlyPublicHeaders) {
  for (const fs::path& header : public_headers()) {
    std::set<std::string> seen;
    std::vector<std::string> all;
    std::map<std::string, std::string> chain;
    includes_of(header, &seen, &all, &chain);
    for (const std::string& name : all) {
      const fs::path file = project_file(name);
      if (file.empty()) continue;  // the standard library's, nlohmann's
      EXPECT_EQ(name.rfind("recycle/", 0), 0u)
          << header.filename() << " includes \"" << name << "\" through " << chain[name];
      EXPECT_TRUE(fs::is_regular_file(kSource / "include" / name)) << name;
    }
  }
}

TEST(PublicHeaders, IncludeNoLibTorch) {
  for (const fs::path& header : public_headers()) {
    std::set<std::string> seen;
    std::vector<std::string> all;
    std::map<std::string, std::string> chain;
    includes_of(header, &seen, &all, &chain);
    EXPECT_FALSE(all.empty()) << header;
    for (const std::string& name : all) {
      const bool torch = name.rfind("torch/", 0) == 0 || name.rfind("ATen/", 0) == 0;
      EXPECT_FALSE(torch) << header.filename() << " brings in <" << name << "> through "
                          << chain[name];
    }
  }
}

// The scan itself: a header of the project that includes LibTorch is seen through another.
TEST(PublicHeaders, TheScanFollowsTheProjectsHeaders) {
  std::set<std::string> seen;
  std::vector<std::string> all;
  std::map<std::string, std::string> chain;
  includes_of(kSource / "engine" / "jobs" / "train_job_parts.h", &seen, &all, &chain);
  EXPECT_TRUE(seen.count("torch/torch.h"));
  EXPECT_TRUE(seen.count("recycle/options.h"));  // through engine/jobs/train_job.h
}

}  // namespace
