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
  return j.dump();
}

// The stages and what each one does: see build_stages.h.
BuildReport run_build(const BuildOptions& options) {
  BuildState s(options);
  load_inputs(s);
  return run_loaded_build(s);
}

BuildReport run_loaded_build(BuildState& s) {
  key_samples(s);
  reconcile_manifest(s);
  plan_split(s);
  if (!s.unchanged) {
    begin_split(s);
    BuildChunk chunk;
    ChunkReader reader(s);
    ChunkWriter writer(s);
    while (next_chunk(s, &chunk)) {
      find_missing(s, &chunk);
      reader.read(&chunk);
      compute_chunk(s, &chunk);
      writer.submit(stage_write(s, &chunk));
    }
    writer.finish();
    finish_split(s);
  }
  return build_report(s);
}

}  // namespace recycle
