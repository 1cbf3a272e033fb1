// The build pipeline behind recycle-build: dataset -> keys -> prefix forward (once per new
// key, batched, no grad) -> codec -> cache. Resumable: a rerun computes only what is missing
// and writes nothing when the split is already complete and unchanged. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/models/model_options.h"
#include "recycle/build.h"    // BuildReport, run_build
#include "recycle/options.h"  // BuildOptions

namespace recycle {

class BuildGroup;  // engine/precompute/build_group.h

// BuildStageSeconds' fields by their names in --json's "stage_seconds".
const std::vector<std::pair<const char*, double BuildStageSeconds::*>>& stage_second_fields();

// One rank's part of a distributed build (group.world() processes, each calling this with the
// same options; see distributed_build.cc for who reads, computes and writes what). Every rank
// gets the same report: the counts of the whole build. A failure on any rank makes every rank
// throw std::runtime_error (the failing one its own exception) with one line naming the rank.
BuildReport run_distributed_build(const BuildOptions& options, BuildGroup& group);

// One rank's part of a sharded build (DistOptions::sharded; see sharded_build.cc): rank r of W
// builds shard r of W of the split into its own options.cache_dir, which no other rank opens.
// Every rank returns its own shard's report (shards, shard_index set), rank 0 with the counts of
// every shard together and each one's report in per_shard. Failures as run_distributed_build's.
BuildReport run_sharded_build(const BuildOptions& options, BuildGroup& group);

}  // namespace recycle
