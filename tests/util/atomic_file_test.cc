// Tests for engine/util/atomic_file.h: a file's old content survives a failed write and a
// SIGTERM in the middle of one, and no temporary file is left behind.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "engine/util/atomic_file.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using recycle::testing::TempDir;
using recycle::testing::read_file;
using recycle::testing::write_file;

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

TEST(AtomicFile, ReplacesTheFileWhole) {
  TempDir tmp;
  const std::string path = tmp.file("model.pt");
  write_file(path, "old");
  recycle::write_file_atomically(path, [&](const std::string& temp) {
    EXPECT_EQ(fs::path(temp).parent_path(), fs::path(path).parent_path());
    write_file(temp, "new content");
  });
  EXPECT_EQ(read_file(path), "new content");
  EXPECT_EQ(files_in(tmp.path()), 1u);
  recycle::write_file_atomically(tmp.file("fresh.pt"),
                                 [](const std::string& t) { write_file(t, "x"); });
  EXPECT_EQ(read_file(tmp.file("fresh.pt")), "x");
}

TEST(AtomicFile, AFailedWriteKeepsTheOldContentAndLeavesNoTemporaryFile) {
  TempDir tmp;
  const std::string path = tmp.file("model.pt");
  write_file(path, "old");
  EXPECT_THROW(recycle::write_file_atomically(path,
                                              [](const std::string& temp) {
                                                write_file(temp, "half");
                                                throw std::runtime_error("disk full");
                                              }),
               std::runtime_error);
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(files_in(tmp.path()), 1u);
  // A writer that writes nothing: commit cannot sync a file that is not there.
  EXPECT_THROW(recycle::write_file_atomically(path, [](const std::string&) {}), std::runtime_error);
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(files_in(tmp.path()), 1u);
}

// A process writing a file gets SIGTERM halfway: it dies of the signal, the old content stays
// and its temporary file is gone. Deterministic: the child says over a pipe when it has
// written half, then waits to be killed.
TEST(AtomicFile, SigtermWhileWritingKeepsTheOldContentAndLeavesNoTemporaryFile) {
  for (int sig : {SIGTERM, SIGINT}) {
    TempDir tmp;
    const std::string path = tmp.file("model.pt");
    write_file(path, "old");
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(ready[0]);
      recycle::write_file_atomically(path, [&](const std::string& temp) {
        write_file(temp, "half of the new");
        const char c = 1;
        if (::write(ready[1], &c, 1) != 1) ::_exit(3);
        for (;;) ::pause();
      });
      ::_exit(4);
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    EXPECT_EQ(files_in(tmp.path()), 2u);  // the temporary file is there
    ASSERT_EQ(::kill(child, sig), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
    EXPECT_EQ(read_file(path), "old");
    EXPECT_EQ(files_in(tmp.path()), 1u);
  }
}

// A TemporaryFile is removed when the process gets SIGTERM (the levels' .weights-PID.pt).
TEST(TemporaryFile, IsRemovedOnSigtermAndOnDestruction) {
  TempDir tmp;
  const std::string path = tmp.file(".weights-x.pt");
  {
    const recycle::TemporaryFile file(path);
    write_file(path, "weights");
  }
  EXPECT_FALSE(fs::exists(path));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    const recycle::TemporaryFile file(path);
    write_file(path, "weights");
    const char c = 1;
    if (::write(ready[1], &c, 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  EXPECT_TRUE(fs::exists(path));
  ASSERT_EQ(::kill(child, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_FALSE(fs::exists(path));
}

// Files left by a process killed outright (SIGKILL) are removed; a running process's, this
// process's and other names are kept.
TEST(TemporaryFile, OrphansOfProcessesThatNoLongerRunAreRemoved) {
  TempDir tmp;
  const pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string orphan = tmp.file(".weights-" + std::to_string(dead) + ".pt");
  const std::string mine = tmp.file(".weights-" + std::to_string(::getpid()) + ".pt");
  const std::string running = tmp.file(".weights-1.pt");  // init runs
  const std::string other = tmp.file(".weights-abc.pt");
  for (const std::string& f : {orphan, mine, running, other}) write_file(f, "w");
  recycle::remove_orphaned_temporaries(tmp.path().string(), ".weights-", ".pt");
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(running));
  EXPECT_TRUE(fs::exists(other));
}

}  // namespace
