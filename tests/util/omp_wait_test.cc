// Tests for engine/util/omp_wait.h: the decision (a user's setting wins, --help measures nothing,
// an invalid value is dropped, a competing task makes it passive), the count of competing tasks
// over a proc tree of the test's own (a niced task does not compete), and the tools: the
// choice is made before libgomp is initialised (it never sees an invalid value) and said in
// --json.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/util/omp_wait.h"
#include "tests/test_util.h"
#include "tests/tool_runner.h"

namespace {

using recycle::OmpWaitDecision;
using recycle::testing::ScopedEnv;
using recycle::testing::TempDir;

OmpWaitDecision decide(const char* policy, const char* spincount, bool help, int competing,
                       int* measured) {
  return recycle::decide_omp_wait(policy, spincount, help, [&] {
    ++*measured;
    return competing;
  });
}

TEST(OmpWait, ACompetingTaskMakesItPassiveAndIdleCoresKeepTheDefault) {
  int measured = 0;
  EXPECT_EQ(decide(nullptr, nullptr, false, 1, &measured).kind, OmpWaitDecision::kPassive);
  EXPECT_EQ(decide(nullptr, nullptr, false, 0, &measured).kind, OmpWaitDecision::kDefault);
  EXPECT_EQ(measured, 2);
}

TEST(OmpWait, AUsersSettingAndHelpAreLeftAloneAndMeasureNothing) {
  int measured = 0;
  EXPECT_EQ(decide("active", nullptr, false, 3, &measured).kind, OmpWaitDecision::kUser);
  EXPECT_EQ(decide(" Passive ", nullptr, false, 3, &measured).kind, OmpWaitDecision::kUser);
  EXPECT_EQ(decide(nullptr, "10000", false, 3, &measured).kind, OmpWaitDecision::kUser);
  EXPECT_EQ(decide(nullptr, nullptr, true, 3, &measured).kind, OmpWaitDecision::kHelp);
  EXPECT_EQ(measured, 0);
  // Only a passive choice, or a value to drop, starts the program again.
  EXPECT_FALSE(decide("active", nullptr, false, 3, &measured).exec_again());
  EXPECT_FALSE(decide(nullptr, nullptr, true, 3, &measured).exec_again());
  EXPECT_TRUE(decide("garbage", nullptr, true, 3, &measured).exec_again());
  EXPECT_TRUE(decide(nullptr, nullptr, false, 1, &measured).exec_again());
  EXPECT_FALSE(decide(nullptr, nullptr, false, 0, &measured).exec_again());
}

TEST(OmpWait, AValueLibgompWouldRefuseIsDroppedAndTheChoiceMadeAsIfUnset) {
  for (const char* bad : {"garbage", "", "activ", "passive x", "1"}) {
    EXPECT_FALSE(recycle::omp_wait_policy_is_valid(bad)) << bad;
    int measured = 0;
    const OmpWaitDecision d = decide(bad, nullptr, false, 1, &measured);
    EXPECT_TRUE(d.drop_invalid_policy) << bad;
    EXPECT_EQ(d.kind, OmpWaitDecision::kPassive) << bad;
    EXPECT_TRUE(decide(bad, nullptr, true, 1, &measured).drop_invalid_policy) << bad;
  }
  for (const char* good : {"active", "PASSIVE", "  active\t", "Passive"}) {
    EXPECT_TRUE(recycle::omp_wait_policy_is_valid(good)) << good;
  }
}

// A proc tree of the test's own: /stat with procs_running, and tasks in PID/task/TID/stat.
class FakeProc {
 public:
  explicit FakeProc(const TempDir& dir) : root_(dir.file("proc")) {
    std::filesystem::create_directories(root_);
  }
  void task(int pid, int tid, const std::string& comm, char state, int nice) {
    const std::string dir = root_ + "/" + std::to_string(pid) + "/task/" + std::to_string(tid);
    std::filesystem::create_directories(dir);
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    // stime cutime cstime priority nice ...
    std::ofstream(dir + "/stat") << tid << " (" << comm << ") " << state
                                 << " 1 1 1 0 -1 0 0 0 0 0 5 5 0 0 20 " << nice
                                 << " 1 0 100 0 0\n";
    if (state == 'R') ++running_;
  }
  // procs_running counts every runnable task, the caller (this test) included.
  const char* root() {
    std::ofstream(root_ + "/stat") << "cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 5\nctxt 6\nprocs_running "
                                   << running_ + 1 << "\nprocs_blocked 0\n";
    return root_.c_str();
  }

 private:
  std::string root_;
  int running_ = 0;
};

TEST(OmpWait, CompetingTasksAreTheRunnableOnesAtThisPriorityOrHigher) {
  TempDir dir;
  FakeProc proc(dir);
  EXPECT_EQ(recycle::competing_tasks(proc.root()), 0);  // nothing else runs: no scan
  const int nice = getpriority(PRIO_PROCESS, 0);
  proc.task(100, 100, "yes", 'R', nice);                // competes
  proc.task(100, 101, "a (busy) thread", 'R', nice - 1);  // a thread, higher priority, odd name
  proc.task(200, 200, "nice yes", 'R', nice + 19);      // niced: yields to the tool
  proc.task(300, 300, "sleeper", 'S', nice);            // asleep
  EXPECT_EQ(recycle::competing_tasks(proc.root()), 2);
  EXPECT_EQ(recycle::competing_tasks("/nonexistent"), 0);
}

// The tools choose before libgomp loads: an invalid value never reaches it (libgomp would print
// its own "Invalid value" line and a blank one), and --help measures nothing.
TEST(OmpWait, TheToolsChooseBeforeLibgompReadsTheEnvironment) {
  TempDir dir;
  const ScopedEnv no_inherited("RECYCLE_OMP_WAIT_CHOICE", nullptr);
  const ScopedEnv policy("OMP_WAIT_POLICY", "garbage");
  const recycle::testing::ToolRun r = recycle::testing::run_tool(dir, "recycle-inspect", "--help");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("libgomp"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Invalid value"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("OMP_WAIT_POLICY='garbage' is neither ACTIVE nor PASSIVE: ignored"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << r.err;
}

TEST(OmpWait, TheJsonReportSaysWhichPolicyAndWhy) {
  if (!recycle::testing::have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is missing";
  TempDir dir;
  const std::string args = "--data fashion-mnist --split test --limit 20 --width 4 --recycle 0.5 "
                           "--json --cache " + dir.file("c");
  const ScopedEnv no_inherited("RECYCLE_OMP_WAIT_CHOICE", nullptr);
  recycle::testing::ToolRun r;
  {
    const ScopedEnv policy("OMP_WAIT_POLICY", "active");
    r = recycle::testing::run_tool(dir, "recycle-build", args);
  }
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.last["omp_wait"]["policy"], "active");
  EXPECT_EQ(r.last["omp_wait"]["why"], "set in the environment");
  const ScopedEnv unset("OMP_WAIT_POLICY", nullptr);
  r = recycle::testing::run_tool(dir, "recycle-build", args);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string policy = r.last["omp_wait"]["policy"];
  EXPECT_TRUE(policy == "passive" || policy == "libgomp's default") << policy;
  EXPECT_NE(r.last["omp_wait"]["why"].get<std::string>().find("at this priority or higher"),
            std::string::npos);
}

}  // namespace
