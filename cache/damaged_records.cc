// The damaged-records list (damaged_records.h).
#include "cache/damaged_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "cache/key_hex.h"

namespace recycle {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHeader = "recycle damaged records 1";
// 32 hex digits and a newline a key: a list names at most 2.9 million records (more damage than
// that is a cache to rebuild).
constexpr size_t kMaxKeys = 2900000;
constexpr uintmax_t kMaxBytes = 64 + kMaxKeys * 33;

Status not_a_list(const fs::path& path, const std::string& why) {
  return Status::corruption(path.string() + " is not a list of damaged records (" + why +
                            "); delete it and run recycle-inspect --verify again to make it anew");
}

}  // namespace

Status read_damaged_records(const std::string& dir, KeySet* keys) {
  keys->clear();
  const fs::path path = fs::path(dir) / kDamagedRecordsName;
  // Only a plain file of the cache's own is read: never through a link out of it, and a FIFO
  // or a device is not waited on (O_NONBLOCK), whatever was put there after a first look.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status();
    if (errno == ELOOP) return not_a_list(path, "a symbolic link");
    return Status::io_error("cannot read " + path.string() + ": " + std::strerror(errno));
  }
  struct stat st {};
  std::string text;
  Status status;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = not_a_list(path, "not a regular file");
  } else if (static_cast<uintmax_t>(st.st_size) > kMaxBytes) {
    status = not_a_list(path, "larger than any such list");
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, &text[got], text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    text.resize(got);
  }
  ::close(fd);
  if (!status.ok()) return status;
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) {  // an empty or cut file too
    return not_a_list(path, "its first line is not \"" + std::string(kHeader) + "\"");
  }
  for (int64_t number = 2; std::getline(in, line); ++number) {
    Key key;
    if (!key_from_hex(line, &key)) {
      return not_a_list(path, "line " + std::to_string(number) + " is not a record's key");
    }
    keys->insert(key);
  }
  return Status();
}

namespace {

// Writes `text` to `path`, a new file (no link followed, none replaced), and syncs it.
Status write_new_file(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error("cannot write " + path.string() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == text.size() && ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  ::close(fd);
  if (!ok) return Status::io_error("cannot write " + path.string() + ": " + why);
  return Status();
}

}  // namespace

Status write_damaged_records(const std::string& dir, std::vector<Key> keys) {
  const fs::path path = fs::path(dir) / kDamagedRecordsName;
  std::error_code ec;
  if (keys.empty()) {
    fs::remove(path, ec);
    if (ec) return Status::io_error("cannot remove " + path.string() + ": " + ec.message());
    return Status();
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  if (keys.size() > kMaxKeys) {
    return Status::invalid_argument(std::to_string(keys.size()) + " records are more than a list "
                                    "holds (" + std::to_string(kMaxKeys) + ")");
  }
  std::ostringstream text;
  text << kHeader << "\n";
  for (const Key& k : keys) text << k.to_hex() << "\n";
  const fs::path temp = fs::path(dir) / kDamagedRecordsTempName;
  fs::remove(temp, ec);  // a leftover of a killed verify, or a link: removed, never written through
  Status st = write_new_file(temp, text.str());
  if (st.ok()) {
    fs::rename(temp, path, ec);
    if (ec) st = Status::io_error("cannot write " + path.string() + ": " + ec.message());
  }
  if (!st.ok()) {
    fs::remove(temp, ec);
    return st;
  }
  const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // the rename, durable
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return Status();
}

Status forget_damaged_records(const std::string& dir, const KeySet& done) {
  if (done.empty()) return Status();
  KeySet listed;
  Status st = read_damaged_records(dir, &listed);
  if (!st.ok()) return st;
  std::vector<Key> left;
  for (const Key& k : listed) {
    if (!done.count(k)) left.push_back(k);
  }
  if (left.size() == listed.size()) return Status();
  return write_damaged_records(dir, std::move(left));
}

}  // namespace recycle
