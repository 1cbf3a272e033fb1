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
                      {"bytes", bytes},
                      {"records", records},
                      {"seconds", seconds},
                      {"prefix_seconds", prefix_seconds},
                      {"samples_per_s", samples_per_s},
                      {"ranks", ranks}};
  if (views > 0) j["views"] = views;
  return j.dump();
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
  if (!unchanged_) {
    begin_split();
    BuildChunk chunk;
    ChunkReader reader(*this);
    ChunkWriter writer(*this);
    while (next_chunk(&chunk)) {
      find_missing(&chunk);
      reader.read(&chunk);
      compute_chunk(&chunk);
      writer.submit(stage_write(&chunk));
    }
    writer.finish();
    finish_split();
  }
  return report();
}

}  // namespace recycle
