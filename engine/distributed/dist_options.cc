#include "engine/distributed/dist_options.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "base/range_check.h"
#include "recycle/errors.h"

namespace recycle {

MasterAddress parse_master(const std::string& master) {
  MasterAddress a;
  if (master.rfind("file:", 0) == 0) {
    a.file = master.substr(5);
    if (a.file.empty() || a.file.front() != '/' || a.file.back() == '/') {
      throw InvalidArgument("--master file:PATH needs an absolute path to a file, not '" +
                            master + "'");
    }
    return a;
  }
  const size_t colon = master.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == master.size()) {
    throw InvalidArgument("--master must be HOST:PORT, [IPv6]:PORT or file:PATH, not '" + master +
                          "'");
  }
  a.host = master.substr(0, colon);
  if (a.host.front() == '[') {
    if (a.host.size() < 3 || a.host.back() != ']') {
      throw InvalidArgument("--master: an IPv6 address goes in brackets, [ADDRESS]:PORT, not '" +
                            master + "'");
    }
    a.host = a.host.substr(1, a.host.size() - 2);  // [::1]:29500
  } else if (a.host.find(':') != std::string::npos) {
    throw InvalidArgument("--master: write an IPv6 address in brackets, [ADDRESS]:PORT, not '" +
                          master + "'");
  }
  const std::string p = master.substr(colon + 1);
  if (p.find_first_not_of("0123456789") != std::string::npos || p.size() > 5 || std::stoi(p) < 1 ||
      std::stoi(p) > 65535) {
    throw InvalidArgument("--master port must be 1..65535, not '" + p + "'");
  }
  a.port = std::stoi(p);
  return a;
}

std::string job_token_from_environment() {
  const char* token = std::getenv(kJobTokenVariable);
  return token ? token : "";
}

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static const char* const kDigits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex;
}

void parse_throttle(const std::string& spec, DistOptions* dist) {
  const size_t colon = spec.find(':');
  const std::string rank = spec.substr(0, colon);
  const std::string ms = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto number = [](const std::string& s) {
    return !s.empty() && s.size() <= 5 && s.find_first_not_of("0123456789") == std::string::npos
               ? std::stoi(s)
               : -1;
  };
  const int r = number(rank), m = number(ms);
  if (r < 0 || m < 1 || m > 60000) {
    throw InvalidArgument("--throttle must be RANK:MS with MS of 1..60000, not '" + spec + "'");
  }
  dist->throttle_rank = r;
  dist->throttle_ms = m;
}

void DistOptions::validate() const {
  const DistOptions& o = *this;
  check_range("--nproc", o.nproc, 0, 256);  // 0: no launcher (the flag itself takes 1..256)
  check_range("--world-size", o.world_size, 1, 65536);
  if (o.world_size > 1 && o.master.empty()) {
    throw InvalidArgument("--world-size above 1 needs --master HOST:PORT");
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    throw InvalidArgument("--rank must be in 0.." + std::to_string(o.world_size - 1) + ", not " +
                          std::to_string(o.rank));
  }
  if (!o.master.empty()) parse_master(o.master);
  check_range("--timeout", o.timeout_seconds, 1, 86400);
  // An average:K with K below 1 is refused as its flag would be; a period of another kind (a
  // Sync filled by hand) as not what the kind reads.
  if (parse_sync(sync_name(o.sync)) != o.sync) {
    throw InvalidArgument("--sync " + sync_name(o.sync) +
                          " sets a period of another kind (average_every belongs to average:K, "
                          "push_every and fetch_every to async)");
  }
  if (o.sync.kind == Sync::Kind::kAverage && o.grad_compression != GradCompression::kNone) {
    throw InvalidArgument(
        "--grad-compression applies to --sync allreduce and async only (average:K "
        "sends parameters in fp32)");
  }
  check_positive_up_to("--bucket-mb", o.bucket_mb, 1024.0);
  const bool async = o.sync.kind == Sync::Kind::kAsync;
  if (!async && o.servers != 1) {
    throw InvalidArgument("--servers applies to --sync async only (a parameter server)");
  }
  if (!async && o.max_staleness != -1) {
    throw InvalidArgument("--max-staleness applies to --sync async only");
  }
  check_range("--servers", o.servers, 1, 65536);
  if (o.max_staleness < -1) {
    throw InvalidArgument("--max-staleness must be 0 or more (or -1: no bound)");
  }
  const int world = o.nproc > 1 ? o.nproc : o.world_size;
  if (async && world > 1 && o.servers > world) {
    throw InvalidArgument("--servers must be at most the number of ranks (" +
                          std::to_string(world) + "): servers are ranks 0..S-1");
  }
  if (o.throttle_rank >= world) {
    throw InvalidArgument("--throttle names rank " + std::to_string(o.throttle_rank) +
                          ", the job has ranks 0.." + std::to_string(world - 1));
  }
}

}  // namespace recycle
