#include "engine/precompute/build_pipeline.h"

#include <nlohmann/json.hpp>

#include "engine/precompute/build_stages.h"

namespace recycle {

std::string BuildReport::to_json() const {
  nlohmann::json j = {{"cache", cache_dir},
                      {"split", split},
                      {"samples", samples},
                      {"unique", unique},
                      {"computed", computed},
                      {"skipped", skipped},
                      {"index_written", index_written},
                      {"files_left_out", files_left_out},
                      {"bytes", bytes},
                      {"records", records},
                      {"seconds", seconds},
                      {"prefix_seconds", prefix_seconds},
                      {"samples_per_s", samples_per_s},
                      {"ranks", ranks}};
  if (views > 0) j["views"] = views;
  if (prefix_share >= 0) {
    j["prefix_share"] = prefix_share;
    j["expected_speedup_vs_full"] = expected_speedup_vs_full();
    j["expected_speedup_vs_online"] = expected_speedup_vs_online();
  }
  return j.dump();
}

double BuildReport::expected_speedup_vs_full() const {
  return prefix_share < 0 || prefix_share >= 1 ? -1 : 1.0 / (1.0 - prefix_share);
}

double BuildReport::expected_speedup_vs_online() const {
  if (prefix_share < 0 || prefix_share >= 1) return -1;
  const double rest = 1.0 - prefix_share;
  return (prefix_share + 3 * rest) / (3 * rest);
}

// The stages and what each one does: see build_stages.h.
BuildReport run_build(const BuildOptions& options) {
  SplitBuild b(options);
  b.load_inputs();
  return b.run();
}

BuildReport SplitBuild::run() {
  key_samples();
  reconcile_manifest();
  plan_split();
  if (!plan_.unchanged()) {
    begin_split();
    BuildChunk chunk, next;
    ChunkReader reader(*this);
    ChunkWriter writer(*this);
    auto prepare = [&](BuildChunk* c) {
      if (!next_chunk(c)) return false;
      find_missing(c);
      reader.read(c);
      start_chunk(c);
      return true;
    };
    // Each chunk's prefix starts before the chunk before it is encoded: on a GPU the device
    // computes it while the outputs before it come back, are encoded and are written.
    for (bool more = prepare(&chunk); more; chunk = std::move(next)) {
      more = prepare(&next);
      finish_chunk(&chunk);
      writer.submit(stage_write(&chunk));
    }
    writer.finish();
    finish_split();
  }
  return report();
}

}  // namespace recycle
