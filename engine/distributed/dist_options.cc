#include "engine/distributed/dist_options.h"

#include <stdexcept>

#include "base/strings.h"

namespace recycle {

std::vector<std::string> grad_compression_names() { return {"none", "fp16", "topk"}; }

int64_t parse_sync(const std::string& sync) {
  if (sync == "allreduce") return 0;
  const std::string prefix = "average:";
  if (sync.compare(0, prefix.size(), prefix) == 0) {
    const std::string k = sync.substr(prefix.size());
    if (!k.empty() && k.size() <= 6 && k.find_first_not_of("0123456789") == std::string::npos &&
        std::stoll(k) >= 1) {
      return std::stoll(k);
    }
  }
  throw std::invalid_argument("--sync must be allreduce or average:K with K >= 1, not '" + sync + "'");
}

void parse_master(const std::string& master, std::string* host, int* port) {
  const size_t colon = master.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == master.size()) {
    throw std::invalid_argument("--master must be HOST:PORT, not '" + master + "'");
  }
  *host = master.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);  // [::1]:29500
  }
  const std::string p = master.substr(colon + 1);
  if (p.find_first_not_of("0123456789") != std::string::npos || p.size() > 5 ||
      std::stoi(p) < 1 || std::stoi(p) > 65535) {
    throw std::invalid_argument("--master port must be 1..65535, not '" + p + "'");
  }
  *port = std::stoi(p);
}

void check_dist_options(const DistOptions& o) {
  if (o.world_size > 1 && o.master.empty()) {
    throw std::invalid_argument("--world-size above 1 needs --master HOST:PORT");
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    throw std::invalid_argument("--rank must be in 0.." + std::to_string(o.world_size - 1) +
                                ", not " + std::to_string(o.rank));
  }
  if (!o.master.empty()) {
    std::string host;
    int port = 0;
    parse_master(o.master, &host, &port);
  }
  if (o.timeout_seconds < 1) throw std::invalid_argument("--timeout must be at least 1 second");
  const int64_t every = parse_sync(o.sync);
  bool known = false;
  for (const std::string& name : grad_compression_names()) known |= name == o.grad_compression;
  if (!known) {
    throw std::invalid_argument("unknown --grad-compression '" + o.grad_compression + "' (known: " +
                                join(grad_compression_names(), ", ") + ")");
  }
  if (every > 0 && o.grad_compression != "none") {
    throw std::invalid_argument("--grad-compression applies to --sync allreduce only (average:K "
                                "sends parameters in fp32)");
  }
  if (!(o.bucket_mb > 0)) throw std::invalid_argument("--bucket-mb must be positive");
}

}  // namespace recycle
