// recycle-reshard's command line.
#include <iostream>

#include "base/range_check.h"
#include "engine/cli/cli_common.h"
#include "engine/cli/commands.h"
#include "engine/distributed/dist_options.h"  // check_sharded_cache
#include "recycle/reshard.h"

namespace recycle {

int reshard_main(int argc, char** argv) {
  ReshardOptions o;
  bool json = false;
  CLI::App app(
      "Moves the records of shards of W (recycle-build --sharded) to shards of another "
      "count, rank to rank over c10d: no prefix runs and no filesystem is shared. Run "
      "it with max(W, the new count) ranks; each reads its old shard at --cache and "
      "writes its new one at --to (docs/scale.md).",
      "recycle-reshard");
  add_cache_flag(app, &o.cache_dir,
                 "the shards as they are ({rank} is the rank; a rank at or above their count "
                 "has none)")
      ->required();
  app.add_option("--to", o.to,
                 "where the new shards go ({rank} too); a new cache each, the old ones are only "
                 "read")
      ->required();
  app.add_option("--shards", o.shards,
                 "the new shard count, " + range_text(int64_t{2}, int64_t{kMaxWorldSize}))
      ->required();
  app.add_flag("--rebuild", o.rebuild, "delete a cache already at --to first and start over");
  int threads = 0;  // --nproc's launcher gives each worker its share; the work is I/O
  app.add_option("--threads", threads,
                 "cores for --nproc's workers, " + range_text(0, kMaxThreads) +
                     " (0 = every core; a rank reads, moves and writes on one thread)")
      ->capture_default_str();
  add_dist_flags(app, &o.dist);
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  return run_tool(app, argc, argv, [&] {
    check_range("--threads", threads, 0, kMaxThreads);
    o.dist.sharded = true;
    o.validate();
    check_sharded_cache(o.dist, o.cache_dir);
    check_sharded_cache(o.dist, o.to);
    const int launched = launch_if_asked(app, argc, argv, o.dist, threads);
    if (launched >= 0) return launched;
    o.dist.store_hosted_elsewhere = std::getenv("RECYCLE_LAUNCHED") != nullptr;
    const ReshardReport r = run_reshard(o);
    std::cout << "rank " << r.rank << ": shards of " << r.shards_from << " to " << r.shards_to
              << "; " << r.samples << " samples in its new shard, " << r.records_kept
              << " records kept, " << r.records_received << " received (" << r.bytes_received
              << " bytes), " << r.records_sent << " sent (" << r.bytes_sent << " bytes), "
              << r.computed << " computed, in " << r.seconds << " s" << std::endl;
    if (json) std::cout << json_with_omp_wait(r.to_json()) << std::endl;
    return 0;
  });
}

}  // namespace recycle
