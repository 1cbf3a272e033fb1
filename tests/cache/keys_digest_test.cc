// KeysDigest: one digest whether samples come one at a time or in chunks of key bytes, equal to
// XXH3-128 over the keys' bytes and little-endian labels end to end, and changed by any key,
// label or order.
#include "recycle/keys_digest.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/coding.h"

namespace recycle {
namespace {

std::vector<Key> some_keys() { return {Key{1, 2}, Key{3, 4}, Key{0xffffffffffffffffULL, 5}}; }

TEST(KeysDigest, OneAtATimeOrInChunksIsXxh3Of128BitsOverKeysAndLabels) {
  const std::vector<Key> keys = some_keys();
  const std::vector<int64_t> labels = {7, -1, 0};
  KeysDigest one;
  std::string bytes, all;
  for (size_t i = 0; i < keys.size(); ++i) {
    one.add(keys[i], labels[i]);
    bytes += keys[i].to_bytes();
    all += keys[i].to_bytes();
    put_le64(&all, static_cast<uint64_t>(labels[i]));
  }
  KeysDigest chunks;
  chunks.add(std::string_view(bytes).substr(0, Key::kBytes), labels.data(), 1);
  chunks.add(std::string_view(bytes).substr(Key::kBytes), labels.data() + 1, 2);
  const XXH128_hash_t h = XXH3_128bits(all.data(), all.size());
  EXPECT_EQ(one.hex(), (Key{h.high64, h.low64}.to_hex()));
  EXPECT_EQ(chunks.hex(), one.hex());
  EXPECT_EQ(one.hex().size(), 32u);
}

TEST(KeysDigest, AnotherKeyLabelOrOrderIsAnotherDigest) {
  const std::vector<Key> keys = some_keys();
  auto digest = [](const std::vector<std::pair<Key, int64_t>>& samples) {
    KeysDigest d;
    for (const auto& [k, label] : samples) d.add(k, label);
    return d.hex();
  };
  const std::string base = digest({{keys[0], 1}, {keys[1], 2}});
  EXPECT_NE(digest({{keys[0], 1}, {keys[2], 2}}), base);
  EXPECT_NE(digest({{keys[0], 1}, {keys[1], 3}}), base);
  EXPECT_NE(digest({{keys[1], 2}, {keys[0], 1}}), base);
  EXPECT_NE(digest({{keys[0], 1}}), base);
  EXPECT_EQ(digest({{keys[0], 1}, {keys[1], 2}}), base);
}

TEST(KeysDigest, KeyBytesThatAreNotOnePerLabelAreRefused) {
  KeysDigest d;
  const int64_t labels[2] = {0, 1};
  EXPECT_THROW(d.add(std::string(Key::kBytes, 'a'), labels, 2), std::invalid_argument);
}

}  // namespace
}  // namespace recycle
