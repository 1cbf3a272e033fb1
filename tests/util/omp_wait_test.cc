// Tests for engine/util/omp_wait.h: a process without a wait policy of its own, on busy cores, is
// replaced by the same command with OMP_WAIT_POLICY=PASSIVE; on idle cores, or with a user's own
// setting, nothing changes.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "engine/util/omp_wait.h"
#include "tests/test_util.h"

namespace {

using recycle::testing::TempDir;
using recycle::testing::read_file;

// What a child writes when the function returned instead of replacing it: "returned POLICY"
// (or "unset"), with open/write only (the child of a threaded process).
bool write_returned(const std::string& out) {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const std::string line = std::string("returned ") + (policy ? policy : "unset") + "\n";
  const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  return close(fd) == 0 && ok;
}

// In a child: sets the environment (name=value, or unset for a null value), calls the function
// with a shell command that writes its OMP_WAIT_POLICY to `out`; when the function returns, the
// child writes "returned" there itself. Returns what `out` holds.
std::string run_child(const std::string& out, const char* policy, const char* spincount,
                      bool busy = true) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (policy) setenv("OMP_WAIT_POLICY", policy, 1); else unsetenv("OMP_WAIT_POLICY");
    if (spincount) setenv("GOMP_SPINCOUNT", spincount, 1); else unsetenv("GOMP_SPINCOUNT");
    const std::string script = "echo \"exec $OMP_WAIT_POLICY\" > '" + out + "'";
    char* argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"),
                    const_cast<char*>(script.c_str()), nullptr};
    recycle::exec_with_passive_omp_wait("/bin/sh", argv, busy);
    _exit(write_returned(out) ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return read_file(out);
}

TEST(OmpWait, WithoutAPolicyTheProgramRunsAgainWithPassive) {
  TempDir tmp;
  EXPECT_EQ(run_child(tmp.file("out"), nullptr, nullptr), "exec PASSIVE\n");
}

TEST(OmpWait, OnIdleCoresNothingChanges) {
  TempDir tmp;
  EXPECT_EQ(run_child(tmp.file("out"), nullptr, nullptr, /*busy=*/false), "returned unset\n");
}

TEST(OmpWait, OthersRunningIsACountOfOtherTasks) {
  const int others = recycle::others_running();
  EXPECT_GE(others, 0);
  EXPECT_LT(others, 100000);
}

TEST(OmpWait, AUsersOwnSettingIsLeftAlone) {
  TempDir tmp;
  EXPECT_EQ(run_child(tmp.file("a"), "active", nullptr), "returned active\n");
  EXPECT_EQ(run_child(tmp.file("b"), nullptr, "10000"), "returned unset\n");
}

TEST(OmpWait, AFailedExecGoesOnAsBefore) {
  TempDir tmp;
  const std::string out = tmp.file("out");
  const pid_t pid = fork();
  if (pid == 0) {
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    char* argv[] = {const_cast<char*>("none"), nullptr};
    recycle::exec_with_passive_omp_wait("/nonexistent/program", argv, true);
    _exit(write_returned(out) ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(read_file(out), "returned unset\n");
}

}  // namespace
