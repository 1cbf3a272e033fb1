// What the ranks of a distributed build tell each other on the job's store (BuildGroup): the
// board's key names, the inputs every rank must agree on before anything is computed (the
// manifest it asks for, the data, the split, its samples' keys and labels as one hash, the
// views, and for a sharded build the shard rule), and a rank's report. Used by the distributed
// build (distributed_build.cc) and the sharded build (sharded_build.cc). No LibTorch here.
#pragma once

#include <functional>
#include <string>

#include "recycle/build.h"  // BuildReport

namespace recycle {

class BuildGroup;
class SplitBuild;
struct BuildOptions;
struct SampleKeys;

// "recycle/build/NAME", and "recycle/build/NAME/RANK": a key on the job's store.
std::string board(const std::string& name);
std::string board(const std::string& name, int rank);

// The inputs of a build whose samples are keyed (SplitBuild::key_samples), as one JSON text.
// `sharded`: the shard rule (cache/shard_rule.h) is part of them.
std::string rank_inputs(SplitBuild& b, const BuildOptions& o, bool sharded);

// The ranks' agreement: every rank but 0 sets its inputs (board("inputs", r)); rank 0 waits for
// each and compares it with `mine`, and throws std::invalid_argument naming the first rank and
// field that differ: "rank 2 would build something else than rank 0: fingerprint differs
// (rank 0: A; rank 2: B) (every rank needs the same data, model, weights and options)".
void set_rank_inputs(const std::string& mine, BuildGroup& g);
void check_rank_inputs(const std::string& mine, BuildGroup& g);

// Runs `part` as this rank's part of the build: std::invalid_argument for a rank outside the
// group; an exception of `part` is published first (BuildGroup::fail: "rank R: LINE"; the
// first failure reported is the one every rank names), then rethrown.
BuildReport run_as_rank(BuildGroup& g, const std::function<BuildReport()>& part);

// A sharded build's key pass (SplitBuild::key_samples(part, parts, gather)): this rank's part of
// the keys (`own`: the samples p of the split's `samples` with p % world == rank, each rank's
// from its own data) published on the board (board("keys", r): the sample count, the skipped
// files and the 16-byte keys), every other rank's read, and every sample's keys returned, the
// skipped files ascending. std::runtime_error in one line when a rank's data has another sample
// count ("rank 0 lists 1000 samples, rank 2 999 (every rank needs the same data...)", the
// lower rank first, whichever rank finds it).
SampleKeys gathered_keys(SampleKeys own, int64_t samples, BuildGroup& g);

// A report as BuildReport::to_json wrote it (per_shard included). std::runtime_error naming
// `whose` ("rank 0's report") when it is not one.
BuildReport report_from_json(const std::string& text, const std::string& whose);

// A sharded build's report from its shards' in rank order (merged_shard_reports, build.h).
BuildReport merged_reports(std::vector<BuildReport> shards, int own);

}  // namespace recycle
