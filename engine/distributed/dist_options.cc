#include "engine/distributed/dist_options.h"

#include <stdexcept>

#include "recycle/errors.h"

namespace recycle {

void parse_master(const std::string& master, std::string* host, int* port) {
  const size_t colon = master.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == master.size()) {
    throw InvalidArgument("--master must be HOST:PORT, not '" + master + "'");
  }
  *host = master.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);  // [::1]:29500
  }
  const std::string p = master.substr(colon + 1);
  if (p.find_first_not_of("0123456789") != std::string::npos || p.size() > 5 || std::stoi(p) < 1 ||
      std::stoi(p) > 65535) {
    throw InvalidArgument("--master port must be 1..65535, not '" + p + "'");
  }
  *port = std::stoi(p);
}

void DistOptions::validate() const {
  const DistOptions& o = *this;
  if (o.world_size > 1 && o.master.empty()) {
    throw InvalidArgument("--world-size above 1 needs --master HOST:PORT");
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    throw InvalidArgument("--rank must be in 0.." + std::to_string(o.world_size - 1) + ", not " +
                          std::to_string(o.rank));
  }
  if (!o.master.empty()) {
    std::string host;
    int port = 0;
    parse_master(o.master, &host, &port);
  }
  if (o.timeout_seconds < 1) throw InvalidArgument("--timeout must be at least 1 second");
  parse_sync(sync_name(o.sync));  // an average:K with K below 1 is refused as its flag would be
  if (o.sync.kind != Sync::Kind::kAllreduce && o.grad_compression != GradCompression::kNone) {
    throw InvalidArgument(
        "--grad-compression applies to --sync allreduce only (average:K "
        "sends parameters in fp32)");
  }
  if (!(o.bucket_mb > 0)) throw InvalidArgument("--bucket-mb must be positive");
}

}  // namespace recycle
