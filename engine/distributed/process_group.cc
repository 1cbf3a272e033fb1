#include "engine/distributed/process_group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/cuda.h>
#include <torch/version.h>
#if defined(RECYCLE_WITH_NCCL) && TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace recycle {

c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int world,
                                                       std::chrono::milliseconds timeout,
                                                       const std::string& host) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
#if TORCH_VERSION_MAJOR >= 2
  // As torch.distributed does: a ProcessGroup whose CPU tensors go to the Gloo backend.
  auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
  return group;
#else
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
#endif
}

void require_nccl() {
#if defined(RECYCLE_WITH_NCCL) && TORCH_VERSION_MAJOR >= 2
  if (!torch::cuda::is_available()) {
    throw std::invalid_argument("NCCL needs a GPU, and this process has none");
  }
#else
  throw std::invalid_argument(
      "data-parallel training on a GPU needs NCCL, which this build lacks (it needs LibTorch 2.x "
      "with CUDA, as pip's torch has, and nccl.h when it is compiled)");
#endif
}

void use_nccl_for_cuda(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                       const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                       std::chrono::milliseconds timeout) {
  require_nccl();
#if defined(RECYCLE_WITH_NCCL) && TORCH_VERSION_MAJOR >= 2
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, options);
  group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, backend);
#else
  (void)group;
  (void)store;
  (void)rank;
  (void)world;
  (void)timeout;
#endif
}

namespace {

// A socket listening on bind:port (SO_REUSEADDR, as c10d sets it). Throws std::system_error.
[[maybe_unused]] int listen_on(const std::string& bind, int family, int port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = -1;
  if (family == AF_INET6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET6, bind.c_str(), &a.sin6_addr);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, bind.c_str(), &a.sin_addr);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0 || listen(fd, 128) != 0) {
    const int e = errno;
    close(fd);
    throw std::system_error(e, std::generic_category(), "Address " + bind + " bind");
  }
  return fd;
}

}  // namespace

c10::intrusive_ptr<c10d::Store> make_tcp_store(const std::string& host, int port, bool server,
                                               const std::string& bind, int family,
                                               std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.isServer = server;
  so.numWorkers = c10::nullopt;
  so.waitWorkers = false;
  so.timeout = timeout;
#if TORCH_VERSION_MAJOR >= 2
  // The server takes our socket, bound to the --master address only (the store is reached there
  // and nowhere else).
  if (server) so.masterListenFd = listen_on(bind, family, port);
#else
  (void)bind;
  (void)family;
#endif
  if (server) return c10::make_intrusive<c10d::TCPStore>(host, so);
#if TORCH_VERSION_MAJOR >= 2
  // 2.x's client logs a warning line per retry (145 lines in 20 s at an HTTP server) and an
  // error with a stack when it gives up; the tools say what went wrong in one line of their own.
  // c10's log keeps to fatal messages from here on.
  if (FLAGS_caffe2_log_level < 3) FLAGS_caffe2_log_level = 3;
#endif
  // A client's constructor connects, then (2.x) pings the server and waits for its answer
  // without a timeout: at a listener that never answers it would wait for ever. It runs on a
  // thread of its own, given `timeout` and a second; a thread still waiting then is left
  // behind, blocked in recv, and ends with the process.
  struct Attempt {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    c10::intrusive_ptr<c10d::Store> store;
    std::exception_ptr error;
  };
  auto attempt = std::make_shared<Attempt>();
  std::thread([attempt, host, so] {
    c10::intrusive_ptr<c10d::Store> store;
    std::exception_ptr error;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(host, so);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(attempt->mutex);
    attempt->store = std::move(store);
    attempt->error = error;
    attempt->done = true;
    attempt->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(attempt->mutex);
  // A second more than the client's own connect timeout, so that where nothing listens its own
  // error (cannot connect) comes first.
  if (!attempt->done_cv.wait_for(lock, timeout + std::chrono::seconds(1),
                                 [&] { return attempt->done; })) {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout).count();
    throw NotAStoreError("no answer within " + std::to_string(seconds) + " s");
  }
  if (attempt->error) {
    try {
      std::rethrow_exception(attempt->error);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      if (what.find("Ping failed") == std::string::npos) throw;
      throw NotAStoreError("it answered otherwise: " + what.substr(0, what.find('\n')));
    }
  }
  return attempt->store;
}

}  // namespace recycle
