// The build job behind recycle-build: one process (run_build), or one rank of a distributed
// build whose ranks meet through the job's c10d store (DistContext). See
// engine/precompute/distributed_build.cc for who reads, computes and writes what.
#pragma once

#include "engine/distributed/dist_options.h"
#include "engine/precompute/build_pipeline.h"

namespace recycle {

// dist.distributed(): joins the job as dist.rank of dist.world_size (DistContext: rendezvous
// at dist.master, heartbeats) and runs this rank's part; a rank lost for dist.timeout_seconds
// (no heartbeat) or a failure on any rank ends every rank with one line. Otherwise run_build.
BuildReport run_build_job(const BuildOptions& options, const DistOptions& dist);

}  // namespace recycle
