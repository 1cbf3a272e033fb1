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
                      {"cache_records", cache_records},
                      {"seconds", seconds},
                      {"prefix_seconds", prefix_seconds},
                      {"samples_per_s", samples_per_s},
                      {"ranks", ranks}};
  if (views > 0) j["views"] = views;
  if (stage_seconds.measured()) {
    nlohmann::json& s = j["stage_seconds"];
    for (const auto& [name, field] : stage_second_fields()) s[name] = stage_seconds.*field;
  }
  if (shards > 0) {
    j["shards"] = shards;
    j["shard"] = shard_index;
  }
  if (!per_shard.empty()) {
    j["per_shard"] = nlohmann::json::array();
    for (const BuildReport& s : per_shard)
      j["per_shard"].push_back(nlohmann::json::parse(s.to_json()));
  }
  if (prefix_share >= 0) {
    j["prefix_share"] = prefix_share;
    j["expected_speedup_vs_full"] = expected_speedup_vs_full();
    j["expected_speedup_vs_online"] = expected_speedup_vs_online();
  }
  return j.dump();
}

const std::vector<std::pair<const char*, double BuildStageSeconds::*>>& stage_second_fields() {
  using S = BuildStageSeconds;
  static const std::vector<std::pair<const char*, double S::*>> fields = {
      {"open", &S::open},   {"lookup", &S::lookup},         {"read", &S::read},
      {"start", &S::start}, {"outputs", &S::outputs},       {"encode", &S::encode},
      {"stage", &S::stage}, {"write_wait", &S::write_wait}, {"finish", &S::finish},
      {"write", &S::write}};
  return fields;
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
BuildReport run_build(const BuildOptions& options) { return SplitBuild(options).run(); }

}  // namespace recycle
