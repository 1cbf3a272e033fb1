#include "engine/util/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
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
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path_.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {  // the rename made durable; it has happened either way
    ::fsync(fd);
    ::close(fd);
  }
}

void write_file_atomically(const std::string& path,
                           const std::function<void(const std::string& temp)>& write) {
  AtomicFile file(path);
  write(file.temp_path());  // on an exception, ~AtomicFile removes the temporary file
  file.commit();
}

}  // namespace recycle
