// Tests for engine/data/regular_file.h: what is read whole, and what is refused with the path.
#include "engine/data/regular_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <stdexcept>
#include <string>

#include "tests/test_util.h"

namespace recycle {
namespace {

using ::recycle::testing::TempDir;
using ::recycle::testing::write_file;

std::string error_of(const std::string& path, uint64_t max_bytes = UINT64_MAX) {
  try {
    read_regular_file(path, max_bytes);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<no exception>";
}

TEST(RegularFile, ReadsEveryByteOfAFile) {
  TempDir dir;
  const std::string bytes("a\0b\xff\n", 5);
  write_file(dir.file("f"), bytes);
  EXPECT_EQ(read_regular_file(dir.file("f")), bytes);
  EXPECT_EQ(read_regular_file(dir.file("f"), 5), bytes);
  write_file(dir.file("empty"), "");
  EXPECT_EQ(read_regular_file(dir.file("empty")), "");
}

TEST(RegularFile, RefusesWhatIsNotARegularFileNamingThePath) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo), fifo + ": is a FIFO, not a regular file");  // and does not block
  EXPECT_EQ(error_of(dir.path().string()),
            dir.path().string() + ": is a directory, not a regular file");
  EXPECT_EQ(error_of(dir.file("missing")),
            dir.file("missing") + " cannot be read: No such file or directory");
  write_file(dir.file("big"), std::string((2u << 20) + 1, 'x'));
  EXPECT_EQ(error_of(dir.file("big"), 1u << 20),
            dir.file("big") + " is 2 MiB, more than the 1 MiB it may be");
}

}  // namespace
}  // namespace recycle
