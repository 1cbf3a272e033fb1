// Tests for engine/util/progress.h when stderr is not a terminal (as under ctest): plain lines
// every RECYCLE_PROGRESS_SECONDS, a last line only when one was printed, nothing when disabled.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine/util/progress.h"
#include "tests/tool_runner.h"

namespace {

using recycle::Progress;
using recycle::testing::ScopedEnv;

TEST(Progress, PlainLinesEveryIntervalAndALastOneWhenNotATerminal) {
  ScopedEnv every("RECYCLE_PROGRESS_SECONDS", "0.05");
  ::testing::internal::CaptureStderr();
  {
    Progress p("build train", 10);
    p.advance(3);
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    p.advance(3);
    p.finish();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;        // no redrawing in a log
  EXPECT_NE(err.find("build train: 6/10 (60%), "), std::string::npos) << err;
  EXPECT_NE(err.find(", ETA "), std::string::npos) << err;
  EXPECT_NE(err.find("build train: 6/10 (60%), "), err.rfind("build train: 6/10 (60%), ")) << err;
  EXPECT_NE(err.find(", done in 0:00\n"), std::string::npos) << err;
}

TEST(Progress, ARunShorterThanTheIntervalOrDisabledPrintsNothing) {
  for (const char* every : {static_cast<const char*>(nullptr), "0", "30"}) {
    ScopedEnv env("RECYCLE_PROGRESS_SECONDS", every);
    ::testing::internal::CaptureStderr();
    {
      Progress p("epoch 1/1", 5);
      p.advance(5);
      p.finish();
    }
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << (every ? every : "unset");
  }
  ScopedEnv env("RECYCLE_PROGRESS_SECONDS", "0.01");
  ::testing::internal::CaptureStderr();
  {
    Progress p("quiet", 5, /*enabled=*/false);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    p.advance(5);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
