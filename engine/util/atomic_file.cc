#include "engine/util/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace recycle {

namespace {

// The registry the signal handler reads: fixed slots of NUL-terminated names, each owned by
// one AtomicFile while `used` is true. The handler only reads names and calls unlink(2).
constexpr int kSlots = 64;
constexpr size_t kNameBytes = 4096;
char g_names[kSlots][kNameBytes];
std::atomic<bool> g_used[kSlots];
std::atomic<unsigned> g_counter{0};

std::mutex g_install_mutex;
bool g_installed[2] = {false, false};  // SIGTERM, SIGINT

extern "C" void unlink_temporaries(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load(std::memory_order_acquire)) ::unlink(g_names[i]);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

// Installs the handler for SIGTERM and SIGINT where their disposition is the default (a
// program with handlers of its own keeps them).
void install_handler() {
  std::lock_guard<std::mutex> guard(g_install_mutex);
  const int signals[2] = {SIGTERM, SIGINT};
  for (int k = 0; k < 2; ++k) {
    if (g_installed[k]) continue;
    struct sigaction old {};
    if (::sigaction(signals[k], nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO)) {
      continue;
    }
    struct sigaction sa {};
    sa.sa_handler = unlink_temporaries;
    sigemptyset(&sa.sa_mask);
    ::sigaction(signals[k], &sa, nullptr);
    g_installed[k] = true;
  }
}

std::mutex g_slots_mutex;
bool g_claimed[kSlots];  // under g_slots_mutex

int register_name(const std::string& name) {
  if (name.size() >= kNameBytes) return -1;
  install_handler();
  std::lock_guard<std::mutex> guard(g_slots_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (g_claimed[i]) continue;
    g_claimed[i] = true;
    // Named, then published: the handler sees a name only when it is whole.
    std::memcpy(g_names[i], name.c_str(), name.size() + 1);
    g_used[i].store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> guard(g_slots_mutex);
  g_used[slot].store(false, std::memory_order_release);
  g_claimed[slot] = false;
}

// The folder `path` is in ("." for a bare name).
std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw std::runtime_error("cannot write " + path + ": " + why);
}

void sync_path(const std::string& path, int flags, const std::string& shown) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) fail(shown, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) fail(shown, std::strerror(err));  // EINVAL: no sync on this fs
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  temp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_counter++);
  slot_ = register_name(temp_);
}

AtomicFile::~AtomicFile() {
  if (!committed_) ::unlink(temp_.c_str());
  unregister(slot_);
}

void AtomicFile::commit() {
  try {
    sync_path(temp_, O_RDONLY, path_);
    if (::rename(temp_.c_str(), path_.c_str()) != 0) fail(path_, std::strerror(errno));
  } catch (...) {
    ::unlink(temp_.c_str());
    unregister(slot_);
    slot_ = -1;
    throw;
  }
  committed_ = true;
  unregister(slot_);
  slot_ = -1;
  const std::string dir = folder_of(path_);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {  // the rename made durable; it has happened either way
    ::fsync(fd);
    ::close(fd);
  }
}

TemporaryFile::TemporaryFile(std::string path) : path_(std::move(path)) {
  slot_ = register_name(path_);
}

TemporaryFile::~TemporaryFile() {
  ::unlink(path_.c_str());
  unregister(slot_);
}

void remove_orphaned_temporaries(const std::string& dir, const std::string& prefix,
                                 const std::string& suffix) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const pid_t self = ::getpid();
  while (const struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() + suffix.size() ||
        name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == self) continue;
    if (::kill(pid, 0) == 0 || errno == EPERM) continue;  // still running
    ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

std::string output_path_problem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return "it is a directory";
  const std::string dir = folder_of(path);
  if (::stat(dir.c_str(), &st) != 0) return "folder " + dir + " does not exist";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return "folder " + dir + " cannot be written: " + std::strerror(errno);
  }
  return "";
}

void write_file_atomically(const std::string& path,
                           const std::function<void(const std::string& temp)>& write) {
  AtomicFile file(path);
  write(file.temp_path());  // on an exception, ~AtomicFile removes the temporary file
  file.commit();
}

}  // namespace recycle
