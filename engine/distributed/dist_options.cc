#include "engine/distributed/dist_options.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

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

std::string path_for_rank(const std::string& path, int rank) {
  std::string out = path;
  const std::string marker = kRankMarker, value = std::to_string(rank);
  for (size_t at = out.find(marker); at != std::string::npos;
       at = out.find(marker, at + value.size())) {
    out.replace(at, marker.size(), value);
  }
  return out;
}

void check_sharded_cache(const DistOptions& dist, const std::string& cache_dir) {
  if (!dist.sharded || dist.nproc <= 1) return;
  if (cache_dir.find(kRankMarker) == std::string::npos) {
    throw std::invalid_argument(
        "--sharded with --nproc " + std::to_string(dist.nproc) +
        " runs every rank on this machine, each with a cache of its own: put {rank} in --cache "
        "(e.g. --cache " + cache_dir + "-{rank})");
  }
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
  if (r < 0 || m < 1 || m > kMaxThrottleMs) {
    throw InvalidArgument("--throttle must be RANK:MS with MS of 1.." +
                          std::to_string(kMaxThrottleMs) + ", not '" + spec + "'");
  }
  dist->throttle_rank = r;
  dist->throttle_ms = m;
}

}  // namespace recycle
