// A sharded build (recycle-build --sharded): every rank builds its own shard of the split into
// its own cache, a directory no other rank opens (usually on its own machine's disk), and the
// ranks talk only through the job's c10d store.
//   1. Every rank loads the inputs (dataset, keyer, model and weights) and keys its part of the
//      split (the samples p with p % W == r: of an image folder, only their files are read);
//      the ranks exchange their parts' keys through the store (rank_board.h: gathered_keys,
//      16 bytes a sample), so that every rank knows every sample's key having read 1/W of the
//      data. Then they agree on what they build (rank_board.h: the identity, the data, the
//      split's samples, their keys and labels as one hash, the views, the shard rule). No rank
//      opens its cache before rank 0 says they agree. A rank reads only the files of its part
//      and of its shard: about 2/W of the folder.
//   2. Rank r keeps the samples whose content key the shard rule puts in shard r of W
//      (cache/shard_rule.h: the same on every rank, from the key alone) and builds them as a
//      one-process build does, into its own cache: resumable, refusing another identity, and
//      writing in the split's manifest entry which shard of how many it holds (SplitShard). A
//      rank killed mid-build leaves its shard as a killed one-process build leaves a cache; the
//      rerun computes what is missing there.
//      With --rebuild, each rank checks that its cache may be deleted before it says so: a rank
//      that would refuse ends the job before any rank deletes anything.
//   3. Every rank but 0 publishes its report (board("report", r)); rank 0 adds them up and
//      publishes the job's (board("final")); every other rank acknowledges it (board("ack", r))
//      before it exits, since the job's store may live in rank 0's process.
// A failure on any rank is published (BuildGroup::fail) and ends every rank with one line.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/activation_store.h"  // check_destroy
#include "cache/cache_dir.h"         // cache_location
#include "engine/precompute/build_group.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/build_stages.h"
#include "engine/precompute/rank_board.h"
#include "engine/precompute/split_inputs.h"  // SampleKeys

namespace recycle {

namespace {

// The job's report: rank 0's own with every shard's counts added, each rank's in per_shard.
BuildReport job_report(const BuildReport& own, BuildGroup& g) {
  std::vector<BuildReport> shards = {own};
  for (int r = 1; r < g.world(); ++r) {
    const std::string whose = "rank " + std::to_string(r) + "'s report";
    shards.push_back(report_from_json(g.wait(board("report", r), r), whose));
  }
  return merged_reports(std::move(shards), 0);
}

// Rank 0: refuses two ranks given one directory (cache_location equal: one machine, one
// directory by any path), which would otherwise meet as "another build is running".
void check_own_directories(const std::string& mine, const std::string& dir, BuildGroup& g) {
  std::vector<std::string> where = {mine};
  for (int r = 1; r < g.world(); ++r) where.push_back(g.wait(board("where", r), r));
  for (int a = 0; a < g.world(); ++a) {
    for (int b = a + 1; b < g.world(); ++b) {
      if (where[a] != where[b]) continue;
      throw std::invalid_argument(
          "ranks " + std::to_string(a) + " and " + std::to_string(b) + " of this sharded build " +
          "were given one directory (rank 0's --cache is " + dir + "): every rank builds its own " +
          "shard into its own cache (put {rank} in --cache on a machine of several ranks)");
    }
  }
}

BuildReport build_shard(const BuildOptions& options, BuildGroup& g) {
  BuildOptions o = options;
  o.shard.index = g.rank();
  o.shard.count = g.world();
  SplitBuild b(o);
  b.key_samples(g.rank(), g.world(), [&](SampleKeys own, int64_t samples) {
    return gathered_keys(std::move(own), samples, g);
  });
  // --rebuild deletes every rank's cache: each rank checks that its own may be deleted before it
  // says it is ready, so that no rank deletes anything while another would refuse.
  if (o.rebuild) ActivationStore::check_destroy(o.cache_dir).throw_if_error();
  const std::string mine = rank_inputs(b, o, /*sharded=*/true);
  const std::string where = cache_location(o.cache_dir);
  if (g.rank() == 0) {
    check_rank_inputs(mine, g);
    check_own_directories(where, o.cache_dir, g);
    g.set(board("agreed"), "1");
  } else {
    g.set(board("where", g.rank()), where);
    set_rank_inputs(mine, g);
    g.wait(board("agreed"), 0);
  }
  BuildReport own = b.run();
  own.ranks = g.world();
  if (g.rank() != 0) {
    g.set(board("report", g.rank()), own.to_json());
    g.wait(board("final"), 0);
    g.set(board("ack", g.rank()), "1");
    return own;
  }
  const BuildReport job = job_report(own, g);
  g.set(board("final"), job.to_json());
  for (int r = 1; r < g.world(); ++r) g.wait(board("ack", r), r);
  return job;
}

}  // namespace

BuildReport run_sharded_build(const BuildOptions& options, BuildGroup& group) {
  return run_as_rank(group, [&] { return build_shard(options, group); });
}

}  // namespace recycle
