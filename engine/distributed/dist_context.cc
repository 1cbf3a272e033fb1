#include "engine/distributed/dist_context.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "base/strings.h"

namespace recycle {

namespace {

constexpr auto kBeat = std::chrono::milliseconds(1000);

std::string to_string(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
std::vector<uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::string hb_key(int rank) { return "recycle/hb/" + std::to_string(rank); }

// One rank's heartbeat as read from the store: beats so far and the step it is on, or
// beats -1 when it never wrote one.
struct Beat {
  int64_t beats = -1;
  int64_t step = -1;
};

std::map<int, Beat> read_beats(c10d::Store& store, int world) {
  std::map<int, Beat> beats;
  for (int r = 0; r < world; ++r) {
    Beat b;
    if (store.check({hb_key(r)})) {
      std::istringstream in(to_string(store.get(hb_key(r))));
      in >> b.beats >> b.step;
    }
    beats[r] = b;
  }
  return beats;
}

// The address of this machine's interface on the route to host:port (a UDP "connect" sends
// nothing): what the other ranks can reach this one's Gloo pairs at.
std::string local_address_toward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    throw std::invalid_argument("--master host '" + host + "' does not resolve");
  }
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  const bool ok = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (!ok) throw std::runtime_error("no route to --master host '" + host + "'");
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

// "1, 3" for ranks {1, 3}.
std::string rank_list(const std::vector<int>& ranks) {
  std::vector<std::string> names;
  for (int r : ranks) names.push_back(std::to_string(r));
  return join(names, ", ");
}

}  // namespace

DistContext::DistContext(const DistOptions& options)
    : options_(options), rank_(options.rank), world_(options.world_size) {
  if (world_ < 2)
    throw std::invalid_argument("--world-size must be at least 2 for a process group");
  options.validate();
  std::string host;
  int port = 0;
  parse_master(options.master, &host, &port);
  const auto timeout = std::chrono::seconds(options.timeout_seconds);

  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  // Without a launcher (ranks started by hand on several machines) rank 0 hosts the store.
  so.isServer = rank_ == 0 && !options.store_hosted_elsewhere;
  so.numWorkers = c10::nullopt;
  so.waitWorkers = false;
  so.timeout = timeout;
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(host, so);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(rank_) + " cannot reach the job's store at " +
                             options.master + ": " + first_line(e.what()));
  }
  // The heartbeat starts before the group, so that a rank that never joins can be named.
  store_->set(hb_key(rank_), to_bytes("0 -1"));
  heartbeat_ = std::thread([this] { heartbeat_loop(); });

  auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
  try {
    gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
        host == "127.0.0.1" || host == "localhost" ? "127.0.0.1"
                                                   : local_address_toward(host, port)));
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", store_), rank_, world_, gloo);
  } catch (const std::exception& e) {
    std::vector<int> missing;
    for (const auto& [r, b] : read_beats(*store_, world_)) {
      if (b.beats < 0) missing.push_back(r);
    }
    stop_ = true;
    heartbeat_.join();
    if (!missing.empty()) {
      throw std::runtime_error("rank(s) " + rank_list(missing) + " of " + std::to_string(world_) +
                               " never joined the job at " + options.master + " within " +
                               std::to_string(options.timeout_seconds) + " s");
    }
    throw std::runtime_error("rank " + std::to_string(rank_) +
                             " cannot make the process group: " + first_line(e.what()));
  }
}

DistContext::~DistContext() {
  stop_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
}

void DistContext::heartbeat_loop() {
  int64_t beats = 0;
  while (!stop_) {
    try {
      store_->set(hb_key(rank_),
                  to_bytes(std::to_string(++beats) + " " + std::to_string(step_.load())));
    } catch (const std::exception&) {
      // The store is gone (its host died): the next collective or store call fails and says so.
    }
    for (auto waited = std::chrono::milliseconds(0); waited < kBeat && !stop_;
         waited += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void DistContext::check_same(const std::string& what, const std::string& value) {
  try {
    check_same_now(what, value);
  } catch (const c10::Error& e) {  // a store timeout: some rank never got here
    throw std::runtime_error(explain_failure(e.what_without_backtrace()));
  }
}

void DistContext::check_same_now(const std::string& what, const std::string& value) {
  const std::string prefix = "recycle/same/" + what + "/";
  store_->set(prefix + std::to_string(rank_), to_bytes(value));
  std::vector<std::string> keys;
  for (int r = 0; r < world_; ++r) keys.push_back(prefix + std::to_string(r));
  store_->wait(keys);
  const std::string want = to_string(store_->get(prefix + "0"));
  std::vector<int> differ;
  std::string other;
  for (int r = 1; r < world_; ++r) {
    const std::string got = to_string(store_->get(keys[r]));
    if (got != want) {
      differ.push_back(r);
      if (other.empty()) other = got;
    }
  }
  if (!differ.empty()) {
    throw std::runtime_error("the ranks disagree on the " + what + ": rank 0 has " + want +
                             ", rank(s) " + rank_list(differ) + " have " + other);
  }
}

void DistContext::barrier(const std::string& name) {
  const std::string key = "recycle/barrier/" + name;
  store_->add(key, 1);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(options_.timeout_seconds);
  while (store_->add(key, 0) < world_) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(explain_failure("barrier '" + name + "' timed out after " +
                                               std::to_string(options_.timeout_seconds) + " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string DistContext::explain_failure(const std::string& error) {
  const std::string what = first_line(error);
  try {
    const std::map<int, Beat> before = read_beats(*store_, world_);
    std::this_thread::sleep_for(2 * kBeat + std::chrono::milliseconds(500));
    const std::map<int, Beat> after = read_beats(*store_, world_);
    std::vector<int> silent;
    int behind = -1;
    int64_t lowest = INT64_MAX, highest = INT64_MIN;
    for (const auto& [r, b] : after) {
      if (r == rank_) continue;
      if (b.beats < 0 || b.beats == before.at(r).beats) silent.push_back(r);
      if (b.step < lowest) lowest = b.step, behind = r;
      highest = std::max(highest, b.step);
    }
    if (!silent.empty()) {
      return "lost rank " + rank_list(silent) + " of " + std::to_string(world_) +
             " (no heartbeat for 2 s): " + what;
    }
    if (behind >= 0 && lowest < std::max(highest, step_.load())) {
      return "lost rank " + std::to_string(behind) + " of " + std::to_string(world_) +
             " (alive but stuck at step " + std::to_string(lowest) + "): " + what;
    }
    return "a collective failed on rank " + std::to_string(rank_) +
           " with every rank alive: " + what;
  } catch (const std::exception&) {
    return "lost the job's store at " + options_.master +
           " (its host, the launcher or rank 0, "
           "is gone): " +
           what;
  }
}

}  // namespace recycle
