// DistOptions::validate (include/recycle/options.h): the data-parallel options alone and
// together. Compiled into the distributed/ room (recycle_distributed), which parses --master.
#include <string>

#include "base/range_check.h"
#include "engine/distributed/dist_options.h"  // parse_master
#include "recycle/errors.h"
#include "recycle/options.h"

namespace recycle {

void DistOptions::validate() const {
  const DistOptions& o = *this;
  check_range("--nproc", o.nproc, 0, kMaxNproc);  // 0: no launcher
  check_range("--world-size", o.world_size, 1, kMaxWorldSize);
  if (o.nproc > 0 && (o.ranks_by_hand || o.world_size > 1 || !o.master.empty())) {
    throw InvalidArgument("--nproc starts its own workers: give either --nproc or "
                          "--rank/--world-size/--master");
  }
  if (o.world_size > 1 && o.master.empty()) {
    throw InvalidArgument("--world-size above 1 needs --master HOST:PORT");
  }
  check_range("--rank", o.rank, 0, o.world_size - 1);
  if (!o.master.empty()) parse_master(o.master);
  check_range("--timeout", o.timeout_seconds, 1, kMaxTimeoutSeconds);
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
  check_positive_up_to("--bucket-mb", o.bucket_mb, kMaxBucketMb);
  const bool async = o.sync.kind == Sync::Kind::kAsync;
  if (!async && o.servers != 1) {
    throw InvalidArgument("--servers applies to --sync async only (a parameter server)");
  }
  if (!async && o.max_staleness != -1) {
    throw InvalidArgument("--max-staleness applies to --sync async only");
  }
  check_range("--servers", o.servers, 1, kMaxServers);
  check_at_least("--max-staleness", o.max_staleness, int64_t{-1});  // -1: no bound
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
