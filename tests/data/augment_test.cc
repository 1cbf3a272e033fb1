// Augmentation specs, ops and the draws that pick a view: engine/data/augment.h,
// keyers/view_key.h and Sampler::set_draws.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/augment.h"
#include "engine/data/sampler.h"
#include "keyers/view_key.h"

namespace {

using recycle::Augment;

// A [c, h, w] image whose every pixel differs from its neighbours.
std::vector<uint8_t> pattern(int64_t c, int64_t h, int64_t w) {
  std::vector<uint8_t> p(static_cast<size_t>(c * h * w));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(1 + (i * 7 + i / 5) % 250);
  return p;
}

TEST(Augment, SpecsParseToCanonicalFormsAndBadOnesAreRefused) {
  EXPECT_EQ(Augment::parse("").spec(), "");
  EXPECT_TRUE(Augment::parse("").empty());
  EXPECT_EQ(Augment::parse("hflip").spec(), "hflip");
  EXPECT_EQ(Augment::parse("crop=4,hflip").spec(), "crop=4,hflip");  // order kept: it matters
  EXPECT_EQ(Augment::parse("resized-crop=0.50,rotate=10.0,jitter=.2").spec(),
            "resized-crop=0.5,rotate=10,jitter=0.2");
  const std::string canonical =
      Augment::parse("hflip,crop=2,resized-crop=0.3,rotate=15,jitter=1").spec();
  EXPECT_EQ(Augment::parse(canonical).spec(), canonical);
  for (const char* bad : {"flip", "hflip=1", "crop", "crop=0", "crop=2.5", "crop=65",
                          "resized-crop=1", "resized-crop=0", "rotate=0", "rotate=181",
                          "jitter=1.5", "jitter=-0.1", "hflip,hflip", "hflip,", ",hflip",
                          "crop=4x", "rotate=nan", "jitter=inf"}) {
    EXPECT_THROW(Augment::parse(bad), std::invalid_argument) << bad;
  }
}

TEST(Augment, TheSameSeedMakesTheSameBytesAndOtherSeedsOtherViews) {
  const Augment a = Augment::parse("hflip,crop=3,resized-crop=0.5,rotate=20,jitter=0.4");
  const std::vector<uint8_t> original = pattern(3, 20, 24);
  std::set<std::vector<uint8_t>> views;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    std::vector<uint8_t> x = original, y = original;
    a.apply(x.data(), 3, 20, 24, seed);
    a.apply(y.data(), 3, 20, 24, seed);
    EXPECT_EQ(x, y) << "seed " << seed;
    views.insert(x);
  }
  EXPECT_EQ(views.size(), 16u);  // every seed its own view
  EXPECT_FALSE(views.count(original));
}

TEST(Augment, HflipMirrorsOrKeepsTheImageWhole) {
  const Augment a = Augment::parse("hflip");
  const std::vector<uint8_t> original = pattern(2, 3, 5);
  std::vector<uint8_t> mirrored = original;
  for (int64_t row = 0; row < 6; ++row) {
    std::reverse(mirrored.begin() + row * 5, mirrored.begin() + (row + 1) * 5);
  }
  int flipped = 0, kept = 0;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    std::vector<uint8_t> x = original;
    a.apply(x.data(), 2, 3, 5, seed);
    if (x == mirrored) ++flipped;
    if (x == original) ++kept;
  }
  EXPECT_EQ(flipped + kept, 64);
  EXPECT_GT(flipped, 16);  // about half each
  EXPECT_GT(kept, 16);
}

TEST(Augment, CropShiftsTheImageByAtMostItsPaddingAndFillsWithZeros) {
  const Augment a = Augment::parse("crop=2");
  const int64_t h = 9, w = 11;
  const std::vector<uint8_t> original = pattern(1, h, w);  // no zero pixel in it
  std::set<std::pair<int64_t, int64_t>> shifts;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<uint8_t> x = original;
    a.apply(x.data(), 1, h, w, seed);
    // The shift (dy, dx) that explains every pixel: x[y][x] = original[y + dy][x + dx] or 0.
    bool explained = false;
    for (int64_t dy = -2; dy <= 2 && !explained; ++dy) {
      for (int64_t dx = -2; dx <= 2 && !explained; ++dx) {
        bool ok = true;
        for (int64_t y = 0; y < h && ok; ++y) {
          for (int64_t c = 0; c < w && ok; ++c) {
            const int64_t sy = y + dy, sx = c + dx;
            const uint8_t want =
                (sy < 0 || sy >= h || sx < 0 || sx >= w) ? 0 : original[sy * w + sx];
            ok = x[y * w + c] == want;
          }
        }
        if (ok) {
          explained = true;
          shifts.insert({dy, dx});
        }
      }
    }
    EXPECT_TRUE(explained) << "seed " << seed;
  }
  EXPECT_EQ(shifts.size(), 25u);  // every shift of the 5 x 5 window is drawn
}

// crop=P pads P pixels each side: above half the smaller side a view is mostly padding (and at
// P >= the side, wholly), so the image's size bounds P.
TEST(Augment, CropLargerThanHalfTheImageIsRefused) {
  const Augment a = Augment::parse("hflip,crop=14");
  EXPECT_NO_THROW(a.check_image(28, 28));
  EXPECT_NO_THROW(a.check_image(28, 40));
  try {
    a.check_image(27, 40);
    FAIL() << "crop=14 on 27x40 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("crop=14 is too large for images of 27x40"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("at most 13"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(Augment::parse("hflip,rotate=10").check_image(2, 2));  // no crop: no bound
}

TEST(Augment, JitterKeepsAConstantImageConstantAndRotateKeepsTheCentre) {
  std::vector<uint8_t> flat(3 * 8 * 8, 100);
  Augment::parse("jitter=0.5").apply(flat.data(), 3, 8, 8, 7);
  EXPECT_EQ(std::set<uint8_t>(flat.begin(), flat.end()).size(), 1u);
  EXPECT_GE(flat[0], 50);
  EXPECT_LE(flat[0], 150);
  // A 9 x 9 image: its centre pixel is its own source at any angle.
  std::vector<uint8_t> img = pattern(1, 9, 9);
  const uint8_t centre = img[4 * 9 + 4];
  Augment::parse("rotate=90").apply(img.data(), 1, 9, 9, 3);
  EXPECT_EQ(img[4 * 9 + 4], centre);
}

TEST(ViewKey, EqualArgumentsGiveEqualKeysAndAnyChangeAnother) {
  const recycle::Key k{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  const recycle::Key other{0x0123456789abcdefULL, 0xfedcba9876543211ULL};
  EXPECT_EQ(recycle::view_key(k, "hflip", 3), recycle::view_key(k, "hflip", 3));
  std::set<recycle::Key> keys = {k, other};
  for (const recycle::Key& c : {k, other}) {
    for (const char* spec : {"hflip", "hflip,crop=4", "crop=4"}) {
      for (int64_t v = 0; v < 8; ++v) keys.insert(recycle::view_key(c, spec, v));
    }
  }
  EXPECT_EQ(keys.size(), 2u + 2 * 3 * 8);  // none equals another, nor a content key
}

TEST(SamplerDraws, EachSampleReadsEveryViewOnceInViewsEpochsWhateverTheRank) {
  const int64_t size = 37, views = 4;
  recycle::Sampler alone(size, /*shuffle=*/true, 5);
  alone.set_draws(views);
  std::vector<std::set<int64_t>> seen(size);
  for (int64_t epoch = 0; epoch < views; ++epoch) {
    const std::vector<int64_t> order = alone.epoch_order(epoch);
    ASSERT_EQ(order.size(), static_cast<size_t>(size));
    std::set<int64_t> positions;
    for (int64_t i : order) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, size * views);
      positions.insert(i % size);
      seen[i % size].insert(i / size);
    }
    EXPECT_EQ(positions.size(), static_cast<size_t>(size));  // every sample once an epoch
  }
  std::set<int64_t> first_views;
  for (int64_t p = 0; p < size; ++p) EXPECT_EQ(seen[p].size(), static_cast<size_t>(views)) << p;
  // The draw is the sample's and the epoch's: two ranks give a sample the same view.
  for (int rank = 0; rank < 2; ++rank) {
    recycle::Sampler r(size, true, 5, rank, 2);
    r.set_draws(views);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      for (int64_t i : r.epoch_order(epoch)) {
        EXPECT_EQ(i / size, recycle::epoch_view(5, i % size, epoch, views));
      }
    }
  }
  // Samples do not all read the same view in one epoch.
  for (int64_t i : alone.epoch_order(0)) first_views.insert(i / size);
  EXPECT_GT(first_views.size(), 1u);
  // No draws: plain positions.
  const recycle::Sampler plain(size, true, 5);
  for (int64_t i : plain.epoch_order(2)) EXPECT_LT(i, size);
}

}  // namespace
