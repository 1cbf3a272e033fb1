#include "cache/cache_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

namespace recycle {

namespace fs = std::filesystem;

Status resolve_cache_path(const std::string& dir, std::string* real, bool* was_link) {
  if (dir.empty()) return Status::invalid_argument("the cache path is empty");
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) return Status::invalid_argument("bad cache path " + dir + ": " + ec.message());
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) {
    p = p.parent_path();  // "link/" names the link itself
  }
  bool followed = false;
  for (int hops = 0;; ++hops) {
    if (hops > 40) return Status::invalid_argument("cache path " + dir + " is a loop of links");
    if (!fs::is_symlink(fs::symlink_status(p, ec))) break;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) return Status::invalid_argument("cannot read link " + p.string() + ": " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
    followed = true;
  }
  if (followed && !fs::exists(p, ec)) {
    return Status::invalid_argument("cache path " + dir + " is a symbolic link to " + p.string() +
                                    ", which does not exist (create it, or remove the link)");
  }
  const fs::path canonical = fs::weakly_canonical(p, ec);
  if (ec) return Status::invalid_argument("bad cache path " + dir + ": " + ec.message());
  *real = canonical.string();
  if (was_link) *was_link = followed;
  return Status();
}

std::string cache_location(const std::string& dir) {
  std::string real;
  if (!resolve_cache_path(dir, &real).ok()) real = fs::absolute(dir).lexically_normal().string();
  fs::path existing(real), rest;
  struct stat st;
  while (::stat(existing.c_str(), &st) != 0 && existing.has_parent_path() &&
         existing != existing.parent_path()) {
    rest = existing.filename() / rest;
    existing = existing.parent_path();
  }
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host) + " " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) +
         " " + rest.string();
}

bool has_cache_marker(const std::string& real_dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(real_dir) / kCacheMarkerName, ec);
}

Status write_cache_marker(const std::string& real_dir) {
  const fs::path path = fs::path(real_dir) / kCacheMarkerName;
  std::ofstream out(path, std::ios::trunc);
  out << "recycle activation cache: RocksDB files and a manifest; manage it with the recycle "
         "tools (recycle-build --rebuild deletes it)\n";
  out.close();
  if (!out) return Status::io_error("cannot write " + path.string());
  return Status();
}

namespace {

// "000123" and the like: RocksDB's file numbers.
bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// A directory that holds nothing, or only the lost+found of a file system's root (a fresh ext4
// mount point, which docs/scale.md allows as the cache directory).
bool empty_but_lost_found(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename() != "lost+found") return false;
  }
  return !ec;
}

}  // namespace

bool looks_like_a_database(const std::string& real_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(real_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    const std::string stem = entry.path().stem().string();
    // A numbered table, blob or log file is RocksDB's; "build.log" is not.
    if (name == "CURRENT" || name == kCacheMarkerName || name.rfind("MANIFEST-", 0) == 0 ||
        name.rfind("OPTIONS-", 0) == 0 ||
        ((ext == ".sst" || ext == ".blob" || ext == ".log") && all_digits(stem))) {
      return true;
    }
  }
  return false;
}

Status missing_cache_status(const std::string& dir, const std::string& real) {
  std::error_code ec;
  if (!fs::exists(real, ec)) return Status::not_found("no cache at " + dir);
  if (!fs::is_directory(real, ec)) {
    return Status::invalid_argument(dir + " is not a directory, so not a cache");
  }
  if (looks_like_a_database(real)) {
    return Status::corruption("cache " + dir + " is damaged: its CURRENT file is missing");
  }
  return Status::not_found(dir + " is not a cache (no CURRENT file)");
}

Status create_cache_dir(const std::string& dir, const std::string& real,
                        const std::function<Status(const std::string& path)>& create_db) {
  std::error_code ec;
  const fs::path target(real);
  fs::create_directories(target.parent_path(), ec);
  if (ec)
    return Status::io_error("cannot create " + target.parent_path().string() + ": " + ec.message());
  fs::path staging;
  for (int attempt = 0;; ++attempt) {
    staging = target.parent_path() / ("." + target.filename().string() + ".recycle-creating-" +
                                      std::to_string(::getpid()) + "-" + std::to_string(attempt));
    if (fs::create_directory(staging, ec)) break;  // false when it exists: not ours, try another
    if (ec) return Status::io_error("cannot create " + staging.string() + ": " + ec.message());
  }
  auto discard = [&] { fs::remove_all(staging, ec); };  // only the directory made above
  Status st = create_db(staging.string());
  if (!st.ok()) {
    discard();
    return st;
  }
  st = write_cache_marker(staging.string());
  if (!st.ok()) {
    discard();
    return st;
  }
  // rename(2) replaces an empty directory (one the user made) but never a non-empty one.
  fs::rename(staging, target, ec);
  if (ec) {
    discard();
    if (fs::exists(target / "CURRENT")) return Status();  // another process made it first
    if (fs::is_directory(target) && empty_but_lost_found(target)) {
      // An empty directory that rename cannot replace: a mount point (a machine's local disk
      // is often mounted where its cache goes) or a directory of another file system. The
      // cache is made in it: RocksDB's lock keeps a second creator out, and the marker,
      // written last, says the database is whole.
      st = create_db(target.string());
      return st.ok() ? write_cache_marker(target.string()) : st;
    }
    if (fs::exists(target)) {
      return Status::invalid_argument(dir + " exists and is not a cache; not writing into it");
    }
    return Status::io_error("cannot create cache " + dir + ": " + ec.message());
  }
  return Status();
}

namespace {
std::mutex writers_mutex;
std::set<std::string>& writers() {
  static std::set<std::string> open_here;
  return open_here;
}
}  // namespace

void note_writer(const std::string& real_dir, bool open) {
  std::lock_guard<std::mutex> guard(writers_mutex);
  if (open) {
    writers().insert(real_dir);
  } else {
    writers().erase(real_dir);
  }
}

long writer_pid(const std::string& real_dir) {
  {
    std::lock_guard<std::mutex> guard(writers_mutex);
    if (writers().count(real_dir)) return static_cast<long>(::getpid());
  }
  const std::string path = (fs::path(real_dir) / "LOCK").string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock probe;
  std::memset(&probe, 0, sizeof probe);
  probe.l_type = F_WRLCK;  // RocksDB locks the whole file for writing with fcntl(F_SETLK)
  probe.l_whence = SEEK_SET;
  long pid = 0;
  if (::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK) pid = probe.l_pid;
  ::close(fd);
  return pid;
}

std::string writer_lock_message(const std::string& dir, const std::string& real_dir) {
  const long pid = writer_pid(real_dir);
  const std::string who = pid == static_cast<long>(::getpid()) ? "this process"
                          : pid > 0                             ? "process " + std::to_string(pid)
                                                                : "another writer";
  return "cache " + dir + " is in use: " + who + " holds its writer lock " +
         (fs::path(real_dir) / "LOCK").string() + " (is another build running? wait for it)";
}

OpenLock& OpenLock::operator=(OpenLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Status OpenLock::acquire(const std::string& real_dir, bool exclusive, double timeout_seconds,
                         OpenLock* out) {
  out->release();
  const int fd = ::open(real_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return Status::io_error("cannot open " + real_dir + " to lock it: " + std::strerror(errno));
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_seconds);
  while (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return Status::io_error("cannot lock " + real_dir + ": " + why);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      return Status::io_error("cache " + real_dir + " stayed locked by another process for " +
                              std::to_string(static_cast<int>(timeout_seconds)) +
                              " s (the open lock, flock on the directory)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The directory may have been deleted (a --rebuild) and made anew while this waited: the
  // lock must be on the directory that now has the name.
  struct stat held, now;
  if (::fstat(fd, &held) != 0 || ::stat(real_dir.c_str(), &now) != 0 ||
      held.st_dev != now.st_dev || held.st_ino != now.st_ino) {
    ::close(fd);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::io_error("cache " + real_dir + " kept being replaced while opening it");
    }
    return acquire(real_dir, exclusive, timeout_seconds / 2, out);
  }
  out->fd_ = fd;
  return Status();
}

void OpenLock::release() {
  if (fd_ >= 0) {
    ::close(fd_);  // closing the descriptor releases the flock
    fd_ = -1;
  }
}

}  // namespace recycle
