#include "engine/distributed/dist_context.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <c10/util/hash.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <vector>

#include "base/strings.h"
#include "engine/distributed/process_group.h"
#include "engine/distributed/sealed_store.h"

namespace recycle {

std::string heartbeat_key(int rank) { return "recycle/hb/" + std::to_string(rank); }

namespace {

constexpr auto kBeat = std::chrono::milliseconds(1000);

std::string to_string(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
std::vector<uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }

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
    if (store.check({heartbeat_key(r)})) {
      std::istringstream in(to_string(store.get(heartbeat_key(r))));
      in >> b.beats >> b.step;
    }
    beats[r] = b;
  }
  return beats;
}

// What --master's host resolves to: the first address, as text, and whether it is a loopback
// address. Throws std::runtime_error ("cannot resolve host ...") when it does not resolve.
struct Resolved {
  std::string text;
  int family = AF_INET;
  bool loopback = false;
};

Resolved resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0 || !found) {
    throw std::runtime_error("cannot resolve host '" + host + "' of --master: " +
                             (rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc)));
  }
  Resolved r;
  r.family = found->ai_family;
  char text[INET6_ADDRSTRLEN] = {};
  if (found->ai_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(found->ai_addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    r.loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    r.loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  r.text = text;
  freeaddrinfo(found);
  return r;
}

// The address of this machine's interface on the route to host:port (a UDP "connect" sends
// nothing): what the other ranks can reach this one's Gloo pairs at (Gloo listens there only).
std::string local_address_toward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    throw std::runtime_error("cannot resolve host '" + host + "' of --master");
  }
  const int family = found->ai_family;
  const int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  const bool ok = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (!ok) throw std::runtime_error("no route to --master host '" + host + "'");
  char text[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr, text,
              sizeof(text));
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&local)->sin_addr, text,
              sizeof(text));
  }
  return text;
}

// Whether something listens on `port` already, on any address: what the TCPStore's server
// (which binds every interface, IPv6 and IPv4) would fail on. SO_REUSEADDR as c10d sets it, so
// that connections of a job that just ended (TIME_WAIT) do not count.
bool port_in_use(int port) {
  for (const int family : {AF_INET6, AF_INET}) {
    const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;  // no IPv6 here
    const int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (family == AF_INET6) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));  // IPv4 too
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(static_cast<uint16_t>(port));
      rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    const int err = errno;
    close(fd);
    if (rc == 0) return false;
    if (err == EADDRINUSE) return true;
  }
  return false;
}

// What a rank presents instead of the token itself, so the store never holds the token: the
// token's HMAC of `message` (sealed_store.h).
std::string keyed_digest(const std::string& token, const std::string& message) {
  return hmac_sha1_hex(token, message);
}

// The options that must agree, as the store holds them: "FLAG\tVALUE" lines (a newline in a
// value written as \n).
using FlagLines = std::vector<std::pair<std::string, std::string>>;

std::string encode(const FlagLines& flags) {
  std::string out;
  for (const auto& [flag, value] : flags) {
    out += flag + "\t";
    for (char c : value) out += c == '\n' ? std::string("\\n") : std::string(1, c);
    out += "\n";
  }
  return out;
}

FlagLines decode(const std::string& text) {
  FlagLines flags;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    flags.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return flags;
}

// The first option on which rank `r` differs from rank 0, as the line every rank stops with;
// "" when they agree.
std::string disagreement(const FlagLines& rank0, const FlagLines& other, int r) {
  auto find = [](const FlagLines& flags, const std::string& flag) -> const std::string* {
    for (const auto& [f, v] : flags) {
      if (f == flag) return &v;
    }
    return nullptr;
  };
  auto shown = [](const std::string* v) {
    return !v ? std::string("(not compared)") : v->empty() ? std::string("(none)") : *v;
  };
  auto line = [&](const std::string& flag, const std::string* a, const std::string* b) {
    return "ranks disagree on " + flag + " (rank 0: " + shown(a) + ", rank " + std::to_string(r) +
           ": " + shown(b) + ")";
  };
  for (const auto& [flag, value] : rank0) {
    const std::string* theirs = find(other, flag);
    if (!theirs || *theirs != value) return line(flag, &value, theirs);
  }
  for (const auto& [flag, value] : other) {
    if (!find(rank0, flag)) return line(flag, nullptr, &value);
  }
  return "";
}

std::string join_key(int rank) { return "recycle/join/" + std::to_string(rank); }
std::string auth_key(int rank) { return "recycle/auth/" + std::to_string(rank); }
std::string options_key(int rank) { return "recycle/options/" + std::to_string(rank); }
const char* const kNonceKey = "recycle/nonce";
// Rank 0's keyed digest of its nonce: a rank whose token differs sees it does (and that it
// cannot read rank 0's sealed values) before it reads any.
const char* const kTokenCheckKey = "recycle/token-check";
const char* const kVerdictKey = "recycle/verdict";
// How many ranks other than 0 have read the verdict (or left on their own disagreement).
const char* const kLeftKey = "recycle/verdict/read";

// "1, 3" for ranks {1, 3}.
std::string rank_list(const std::vector<int>& ranks) {
  std::vector<std::string> names;
  for (int r : ranks) names.push_back(std::to_string(r));
  return join(names, ", ");
}

// The options this rank must give alike with every other, as it publishes them: --world-size
// always, then those of `must_agree` marked same_on_every_rank.
FlagLines options_to_agree(int world, const std::vector<FlagValue>& must_agree) {
  FlagLines mine = {{"--world-size", std::to_string(world)}};
  for (const FlagValue& f : must_agree) {
    if (f.same_on_every_rank && f.flag != "--world-size") mine.emplace_back(f.flag, f.value);
  }
  return mine;
}

// A rank other than 0: waits for what rank 0 writes first, its nonce and options. A TCP store
// that is up is rank 0's, so they come at once: a service that does not answer with them (or
// answers otherwise) within a few seconds is not a job's store.
void wait_for_rank0(c10d::Store& store, const DistOptions& options, bool tcp_client) {
  const auto timeout = std::chrono::seconds(options.timeout_seconds);
  const auto first = tcp_client
                         ? std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(10))
                         : std::chrono::milliseconds(timeout);
  try {
    store.wait({kNonceKey, options_key(0)}, first);
  } catch (const std::exception& e) {  // c10::Error, or bad_alloc from a length it misread
    if (!tcp_client) {
      throw std::runtime_error("rank 0 never joined the job at " + options.master + " within " +
                               std::to_string(options.timeout_seconds) + " s");
    }
    const std::string what = first_line(e.what());
    const std::string seconds =
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(first).count());
    throw std::runtime_error(
        "the service at " + options.master + " is not a recycle job's store (" +
        (what.find("imeout") != std::string::npos ? "no answer within " + seconds + " s"
                                                  : "it answered otherwise") +
        ": " + what + ")");
  }
}

// One process per rank: the second to come as `rank` is refused here (and, when it comes before
// rank 0's verdict, the whole job with it).
void join_once(c10d::Store& store, int rank, const std::string& master) {
  const std::string me = "rank " + std::to_string(rank);
  if (store.add(join_key(rank), 1) > 1) {
    throw std::runtime_error(me + " joined twice: another process already joined the job at " +
                             master + " as " + me + " (check --rank)");
  }
}

// A rank other than 0: presents its digest of rank 0's nonce and its options. On its own
// disagreement with rank 0 it leaves at once (counted as having read the verdict).
void present_to_rank0(c10d::Store& store, int rank, const std::string& token,
                      const FlagLines& mine) {
  const std::string me = "rank " + std::to_string(rank);
  const std::string nonce = to_string(store.get(kNonceKey));
  store.set(auth_key(rank), to_bytes(keyed_digest(token, nonce + "/" + me)));
  store.set(options_key(rank), to_bytes(encode(mine)));
  if (to_string(store.get(kTokenCheckKey)) != keyed_digest(token, nonce + "/token check")) {
    // Rank 0 refuses this rank with this line (its verdict is sealed under the other token).
    store.add(kLeftKey, 1);
    throw std::runtime_error(me + " presented a wrong job token (" +
                             std::string(kJobTokenVariable) +
                             " must be the same on every rank): refused");
  }
  const std::string differ = disagreement(decode(to_string(store.get(options_key(0)))), mine, rank);
  if (!differ.empty()) {
    store.add(kLeftKey, 1);
    throw std::runtime_error(differ);
  }
}

// A rank other than 0: waits for rank 0's verdict, and stops with it unless it is "ok".
void await_verdict(c10d::Store& store, const DistOptions& options) {
  const auto timeout = std::chrono::seconds(options.timeout_seconds);
  // Rank 0 may wait up to the timeout for the last rank before it gives its verdict.
  std::string verdict;
  try {
    store.wait({kVerdictKey}, 2 * timeout + std::chrono::seconds(10));
    verdict = to_string(store.get(kVerdictKey));
    store.add(kLeftKey, 1);  // rank 0 may close the store now
  } catch (const std::exception& e) {
    throw std::runtime_error(
        "lost rank 0 during the rendezvous at " + options.master + " (no verdict within " +
        std::to_string(2 * options.timeout_seconds + 10) + " s): " + first_line(e.what()));
  }
  if (verdict != "ok") throw std::runtime_error(verdict);
}

// Rank 0's refusal: `line` as the verdict for every rank, and (when rank 0 hosts the store,
// which goes with it) a few seconds for the ranks that came to read it. Returns the error to
// throw; the store failing meanwhile does not change it.
std::runtime_error refuse(c10d::Store& store, int world, const std::string& line) {
  try {
    store.set(kVerdictKey, to_bytes(line));
    int came = 0;
    for (int r = 1; r < world; ++r) came += store.check({options_key(r)}) ? 1 : 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (store.add(kLeftKey, 0) < came && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
  }
  return std::runtime_error(line);
}

// Rank 0, once rank `r` has presented itself: refuses the job unless `r`'s digest of `nonce` is
// the one the job token gives and its options agree with rank 0's (`mine`).
void admit_rank(c10d::Store& store, int world, int r, const std::string& token,
                const std::string& nonce, const FlagLines& mine) {
  const std::string rank_r = "rank " + std::to_string(r);
  if (to_string(store.get(auth_key(r))) != keyed_digest(token, nonce + "/" + rank_r)) {
    throw refuse(store, world,
                 rank_r + " presented a wrong job token (" + kJobTokenVariable +
                     " must be the same on every rank): refused");
  }
  const std::string differ = disagreement(mine, decode(to_string(store.get(options_key(r)))), r);
  if (!differ.empty()) throw refuse(store, world, differ);
}

// Rank 0: admits every other rank, each as soon as it has presented itself; refuses the job
// with those that never did when the timeout runs out first.
void admit_ranks(c10d::Store& store, int world, const DistOptions& options,
                 const std::string& token, const std::string& nonce, const FlagLines& mine) {
  std::set<int> pending;
  for (int r = 1; r < world; ++r) pending.insert(r);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_seconds);
  while (!pending.empty()) {
    for (auto it = pending.begin(); it != pending.end();) {
      const int r = *it;
      if (!store.check({auth_key(r), options_key(r)})) {
        ++it;
        continue;
      }
      admit_rank(store, world, r, token, nonce, mine);
      it = pending.erase(it);
    }
    if (pending.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw refuse(store, world,
                   "rank(s) " + rank_list({pending.begin(), pending.end()}) + " of " +
                       std::to_string(world) + " never joined the job at " + options.master +
                       " within " + std::to_string(options.timeout_seconds) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Rank 0, once every rank has been admitted: refuses the job when two processes joined as one
// rank (the second stopped itself in join_once; the first and the others must stop too).
void refuse_double_joins(c10d::Store& store, int world, const std::string& master) {
  for (int r = 0; r < world; ++r) {
    if (store.add(join_key(r), 0) > 1) {
      throw refuse(store, world,
                   "rank " + std::to_string(r) + " joined twice: two processes joined the job at " +
                       master + " as rank " + std::to_string(r) + " (check --rank)");
    }
  }
}

}  // namespace

DistContext::DistContext(const DistOptions& options, const std::vector<FlagValue>& must_agree,
                         bool gpu)
    : options_(options), rank_(options.rank), world_(options.world_size) {
  if (world_ < 2)
    throw std::invalid_argument("--world-size must be at least 2 for a process group");
  options.validate();
  if (gpu) {
    if (options.sync.kind == Sync::Kind::kAsync) {
      throw std::invalid_argument("--sync async runs its parameter servers on the CPU: train on "
                                  "the CPU, or use allreduce or average:K on a GPU");
    }
    require_nccl();  // before the rendezvous: every rank stops at once
  }
  // A write to a peer that died must fail with EPIPE, which Gloo turns into an error of that
  // pair, not kill this process: an asynchronous job goes on without a lost worker.
  signal(SIGPIPE, SIG_IGN);
  open_store(parse_master(options.master));
  rendezvous(must_agree);

  store_->set(heartbeat_key(rank_), to_bytes("0 -1"));
  heartbeat_.stop = &stop_;
  heartbeat_.thread = std::thread([this] { heartbeat_loop(); });

  try {
    group_ = make_gloo_group(c10::make_intrusive<c10d::PrefixStore>("gloo", store_), rank_, world_,
                             std::chrono::seconds(options.timeout_seconds), device_host_);
    if (gpu) {
      use_nccl_for_cuda(group_, c10::make_intrusive<c10d::PrefixStore>("nccl", store_), rank_,
                        world_, std::chrono::seconds(options.timeout_seconds));
    }
  } catch (const std::exception& e) {
    // Every rank came to the rendezvous: name the one lost since, if any (heartbeat_ stops
    // with this object's members).
    throw std::runtime_error(explain_failure("rank " + std::to_string(rank_) +
                                             " cannot make the process group on " + device_host_ +
                                             ": " + first_line(e.what())));
  }
}

void DistContext::open_store(const MasterAddress& address) {
  const auto timeout = std::chrono::seconds(options_.timeout_seconds);
  const std::string me = "rank " + std::to_string(rank_);
  if (address.is_file()) {
    // Every rank on this machine: no socket but Gloo's, on the loopback address.
    try {
      store_ = c10::make_intrusive<c10d::FileStore>(address.file, -1);  // the launcher removes it
    } catch (const std::exception& e) {
      throw std::runtime_error(me + " cannot open the job's store " + address.file + ": " +
                               first_line(e.what()));
    }
    store_->setTimeout(timeout);
    device_host_ = "127.0.0.1";
    return;
  }
  if (job_token_from_environment().empty()) {
    // A store other hosts can reach: without a token any of them could join the job.
    throw std::invalid_argument(
        std::string("ranks started by hand (--master HOST:PORT) need ") + kJobTokenVariable +
        ", the same secret on every rank, so that no other host can join the job: export " +
        kJobTokenVariable + "=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n') and give "
        "it to each rank (--nproc N makes one for its local workers)");
  }
  const Resolved resolved = resolve(address.host, address.port);
  // Without a launcher (ranks started by hand on several machines) rank 0 hosts the store.
  const bool server = rank_ == 0 && !options_.store_hosted_elsewhere;
  const std::string in_use = "port " + std::to_string(address.port) + " on " + address.host +
                             " is already in use (another program or job listens there: give "
                             "--master another port)";
  if (server && port_in_use(address.port)) throw std::runtime_error(in_use);
  try {
    store_ = make_tcp_store(address.host, address.port, server, resolved.text, resolved.family,
                            timeout);
  } catch (const NotAStoreError& e) {
    throw std::runtime_error("the service at " + options_.master +
                             " is not a recycle job's store (" + e.what() + ")");
  } catch (const std::exception& e) {
    const std::string what = first_line(e.what());
    if (server && what.find("ddress already in use") != std::string::npos) {
      throw std::runtime_error(in_use);
    }
    throw std::runtime_error(me + " cannot reach the job's store at " + options_.master + ": " +
                             what);
  }
  // Every value sealed with the job token: whoever else reaches the port reads ciphertext and
  // cannot write a value a rank accepts (1.13's store listens on every interface).
  store_ = c10::make_intrusive<SealedStore>(
      store_, job_token_from_environment(), options_.master,
      std::vector<std::string>{kNonceKey, kTokenCheckKey, "recycle/auth/"});
  device_host_ = address.host == "localhost" ? "127.0.0.1"
                 : resolved.loopback         ? resolved.text
                                             : local_address_toward(address.host, address.port);
}

void DistContext::rendezvous(const std::vector<FlagValue>& must_agree) {
  const FlagLines mine = options_to_agree(world_, must_agree);
  const std::string token = job_token_from_environment();
  const std::string me = "rank " + std::to_string(rank_);
  const MasterAddress address = parse_master(options_.master);
  const bool tcp_client = !address.is_file() && (rank_ != 0 || options_.store_hosted_elsewhere);
  try {
    if (rank_ != 0) wait_for_rank0(*store_, options_, tcp_client);
    join_once(*store_, rank_, options_.master);
    if (rank_ != 0) {
      present_to_rank0(*store_, rank_, token, mine);
      await_verdict(*store_, options_);
      return;
    }
    // Rank 0: the nonce makes every digest good for this job only; then each rank in turn.
    const std::string nonce = random_hex(16);
    store_->set(options_key(0), to_bytes(encode(mine)));
    store_->set(kTokenCheckKey, to_bytes(keyed_digest(token, nonce + "/token check")));
    store_->set(kNonceKey, to_bytes(nonce));
    admit_ranks(*store_, world_, options_, token, nonce, mine);
    refuse_double_joins(*store_, world_, options_.master);
    store_->set(kVerdictKey, to_bytes("ok"));
  } catch (const c10::Error& e) {
    throw std::runtime_error(me + " lost the job's store at " + options_.master +
                             " during the rendezvous: " + first_line(e.what_without_backtrace()));
  }
}

DistContext::~DistContext() { heartbeat_.join(); }

void DistContext::heartbeat_loop() {
  int64_t beats = 0;
  while (!stop_) {
    try {
      store_->set(heartbeat_key(rank_),
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

std::vector<int64_t> DistContext::heartbeat_counts() {
  std::vector<int64_t> counts;
  for (const auto& [r, b] : read_beats(*store_, world_)) counts.push_back(b.beats);
  return counts;
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
