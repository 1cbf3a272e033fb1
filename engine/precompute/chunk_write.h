// The write of one planned chunk, the step recycle-build's SplitBuild (build_stages.cc) and the
// library's CacheWriter (engine/jobs/cache_writer.cc) share: the chunk's computed records and the
// index entries of its todo positions staged in one batch (cache/split_writer.h), sealed with the
// manifest's counts, and the report's counters advanced. Where the chunk's samples come from
// stays with them. No LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/split_writer.h"
#include "engine/precompute/key_plan.h"
#include "recycle/build.h"  // BuildReport
#include "recycle/key.h"

namespace recycle {

// Stages records[i] under record_keys[i] (records emptied: the batch holds its own copy) and the
// entries entry_at(pos) of the positions plan.todo()[begin, end), seals the write and adds its
// records, bytes and entries to report's computed, bytes and index_written. The caller writes
// it (SplitWriter::write, or a ChunkWriter's thread).
StagedWrite stage_chunk(SplitWriter& writer, const KeyPlan& plan, size_t begin, size_t end,
                        const std::vector<Key>& record_keys, std::vector<std::string>* records,
                        const std::function<IndexEntry(int64_t pos)>& entry_at,
                        BuildReport* report);

}  // namespace recycle
