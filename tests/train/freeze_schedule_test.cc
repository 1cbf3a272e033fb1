// Freeze schedules (engine/train/freeze_schedule.h): parsing, Composer's linear rule over blocks
// and the auto rule on gradient norm histories.
#include "engine/train/freeze_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace {

using recycle::FreezeRule;
using recycle::frozen_blocks_after;
using recycle::GradNormHistory;
using recycle::linear_frozen_blocks;
using recycle::parse_freeze_rule;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(FreezeSchedule, ParsesBothRulesAndRoundTripsTheirSpecs) {
  const FreezeRule linear = parse_freeze_rule("linear:0.25:0.75");
  EXPECT_EQ(linear.kind, FreezeRule::Kind::kLinear);
  EXPECT_DOUBLE_EQ(linear.start, 0.25);
  EXPECT_DOUBLE_EQ(linear.level, 0.75);
  EXPECT_EQ(linear.spec(), "linear:0.25:0.75");
  EXPECT_EQ(parse_freeze_rule(linear.spec()).spec(), linear.spec());
  const FreezeRule automatic = parse_freeze_rule("auto");
  EXPECT_EQ(automatic.kind, FreezeRule::Kind::kAuto);
  EXPECT_DOUBLE_EQ(automatic.threshold, recycle::kDefaultAutoThreshold);
  EXPECT_EQ(parse_freeze_rule("auto:0.05").spec(), "auto:0.05");
  EXPECT_EQ(automatic.name(), "auto");
}

TEST(FreezeSchedule, RefusesBadSpecsWithOneLine) {
  for (const char* bad :
       {"", "linear", "linear:0.5", "linear:1:0.5", "linear:0.5:0", "linear:-0.1:0.5",
        "linear:0.5:1.5", "linear:x:0.5", "linear:0.5:0.5:1", "auto:0", "auto:2", "auto:nan",
        "auto:0.1:2", "fixed:0.5", "Linear:0:1"}) {
    try {
      parse_freeze_rule(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find("--freeze"), std::string::npos) << what;
    }
  }
}

// Composer: nothing frozen up to START, LEVEL of the blocks at the end, linear between.
TEST(FreezeSchedule, LinearFollowsComposerOverBlocks) {
  EXPECT_EQ(linear_frozen_blocks(0.5, 1.0, 0.5, 8), 0);
  EXPECT_EQ(linear_frozen_blocks(0.5, 1.0, 0.75, 8), 4);
  EXPECT_EQ(linear_frozen_blocks(0.5, 1.0, 1.0, 8), 8);
  EXPECT_EQ(linear_frozen_blocks(0.0, 0.75, 1.0, 8), 6);
  EXPECT_EQ(linear_frozen_blocks(0.0, 0.75, 0.5, 8), 3);
  EXPECT_EQ(linear_frozen_blocks(0.25, 0.5, 0.625, 8), 2);  // half of the way to 4
  EXPECT_EQ(linear_frozen_blocks(0.0, 1.0, 0.3, 8), 2);     // 2.4 rounds down

  // Over 4 epochs of 8 blocks with linear:0.25:0.75: the decision at the end of epoch e uses
  // the fraction (e + 1) / 4 done.
  const FreezeRule rule = parse_freeze_rule("linear:0.25:0.75");
  const GradNormHistory none;
  EXPECT_EQ(frozen_blocks_after(rule, 0, 4, 8, 0, none), 0);  // 0.25 done: not past START
  EXPECT_EQ(frozen_blocks_after(rule, 1, 4, 8, 0, none), 2);  // 8 * 0.75 / 3 = 2
  EXPECT_EQ(frozen_blocks_after(rule, 2, 4, 8, 2, none), 4);
  EXPECT_EQ(frozen_blocks_after(rule, 3, 4, 8, 4, none), 6);
}

TEST(FreezeSchedule, NeverUnfreezesNorPassesTheBlocks) {
  const FreezeRule rule = parse_freeze_rule("linear:0.5:0.5");
  // The rule would give 0 at the first epoch: 3 frozen already stay frozen.
  EXPECT_EQ(frozen_blocks_after(rule, 0, 10, 8, 3, {}), 3);
  EXPECT_THROW(frozen_blocks_after(rule, 0, 10, 8, 9, {}), std::invalid_argument);
  EXPECT_THROW(frozen_blocks_after(rule, 10, 10, 8, 0, {}), std::invalid_argument);
}

TEST(FreezeSchedule, AutoFreezesTheNextBlockWhenItsGradientNormSettles) {
  const FreezeRule rule = parse_freeze_rule("auto:0.1");
  // Block 0's norm: 2.0 then 1.0 (change 0.5), then 0.95 (change 0.05 < 0.1).
  GradNormHistory h = {{2.0, 4.0, 1.0}, {1.0, 3.0, 1.0}};
  EXPECT_NEAR(recycle::grad_norm_change(h, 1, 0), 0.5, 1e-12);
  EXPECT_EQ(frozen_blocks_after(rule, 1, 10, 3, 0, h), 0);
  h.push_back({0.95, 2.9, 1.0});
  EXPECT_NEAR(recycle::grad_norm_change(h, 2, 0), 0.05, 1e-12);
  EXPECT_EQ(frozen_blocks_after(rule, 2, 10, 3, 0, h), 1);
  // One block at a time: block 1 changed little too (2.9 vs 3.0) but waits its turn.
  EXPECT_EQ(frozen_blocks_after(rule, 2, 10, 3, 1, h), 2);
  // After block 0 froze, its norm is missing (NaN); block 1 is judged on its own history.
  h.push_back({kNaN, 2.0, 1.0});
  EXPECT_EQ(frozen_blocks_after(rule, 3, 10, 3, 1, h), 1);  // 2.9 -> 2.0 is a 31% change
}

TEST(FreezeSchedule, AutoWaitsForTwoEpochsOfHistoryAndStopsAtTheLastBlock) {
  const FreezeRule rule = parse_freeze_rule("auto:0.5");
  EXPECT_EQ(frozen_blocks_after(rule, 0, 5, 2, 0, {{1.0, 1.0}}), 0);  // one epoch: no change yet
  const GradNormHistory zero_before = {{0.0, 1.0}, {0.0, 1.0}};
  EXPECT_EQ(frozen_blocks_after(rule, 1, 5, 2, 0, zero_before), 0);   // no relative change of 0
  EXPECT_EQ(frozen_blocks_after(rule, 1, 5, 2, 2, {{1.0, 1.0}, {1.0, 1.0}}), 2);
}

}  // namespace
