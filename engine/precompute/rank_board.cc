#include "engine/precompute/rank_board.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/strings.h"  // first_line
#include "cache/shard_rule.h"
#include "engine/data/dataset.h"
#include "engine/precompute/build_group.h"
#include "engine/precompute/build_pipeline.h"  // stage_second_fields
#include "engine/precompute/build_stages.h"
#include "engine/precompute/split_inputs.h"
#include "recycle/build.h"
#include "recycle/key.h"
#include "recycle/keys_digest.h"

namespace recycle {

using nlohmann::json;

std::string board(const std::string& name) { return "recycle/build/" + name; }
std::string board(const std::string& name, int rank) {
  return board(name) + "/" + std::to_string(rank);
}

std::string rank_inputs(SplitBuild& b, const BuildOptions& o, bool sharded) {
  const std::vector<Key>& keys = b.plan().keys();
  const std::vector<int64_t>& labels = b.data().labels;
  KeysDigest digest;
  for (size_t i = 0; i < keys.size(); ++i) digest.add(keys[i], labels[i]);
  json manifest = json::parse(b.requested().to_json_string());
  // The manifest leaves fp32 unsaid (caches made before the precision keep their JSON): said
  // here, a rank's mismatch names both words.
  manifest["prefix_precision"] = b.requested().prefix_precision_name();
  json j = {{"manifest", manifest},
            {"data", b.data().description},
            {"split", o.data.split},
            {"samples", static_cast<int64_t>(keys.size())},
            {"views", json{{"augment", b.augment()}, {"views", b.views()}}},
            {"keys and labels", digest.hex()}};
  if (sharded) j["shard rule"] = kShardRule;
  return j.dump();
}

namespace {

// The text of a value as a message shows it.
std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// "FIELD differs (rank 0: A; rank R: B)", each side cut to 80 characters around where they first
// differ (two data descriptions alike up to "limit=400" and "limit=500" show that part).
std::string differs(const std::string& field, const json& v, const json& o, int rank) {
  const std::string a = text_of(v), b = text_of(o);
  size_t at = 0;
  while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
  const size_t from = at > 40 ? at - 40 : 0;
  auto cut = [&](const std::string& t) {
    std::string shown = from > 0 ? "..." + t.substr(std::min(from, t.size())) : t;
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
    return shown;
  };
  return field + " differs (rank 0: " + cut(a) + "; rank " + std::to_string(rank) + ": " + cut(b) +
         ")";
}

// "" when equal, else differs(...) for the first field that differs.
std::string first_difference(const json& mine, const json& theirs, int rank) {
  for (const auto& [name, value] : mine.items()) {
    const json other = theirs.contains(name) ? theirs[name] : json();
    if (value == other) continue;
    if (value.is_object() && other.is_object()) {
      json fields = value;  // every field either side has, rank 0's first
      for (const auto& [field, o] : other.items()) {
        if (!fields.contains(field)) fields[field] = json();
      }
      for (const auto& [field, unused] : fields.items()) {
        const json v = value.contains(field) ? value[field] : json("(none)");
        const json o = other.contains(field) ? other[field] : json("(none)");
        if (v != o) return differs(field, v, o, rank);
      }
    }
    return differs(name, value, other, rank);
  }
  return theirs.size() == mine.size() ? "" : "what it builds differs";
}

}  // namespace

void set_rank_inputs(const std::string& mine, BuildGroup& g) {
  g.set(board("inputs", g.rank()), mine);
}

void check_rank_inputs(const std::string& mine, BuildGroup& g) {
  const json own = json::parse(mine);
  for (int r = 1; r < g.world(); ++r) {
    const json theirs = json::parse(g.wait(board("inputs", r), r), nullptr, false);
    const std::string diff = first_difference(own, theirs, r);
    if (!diff.empty()) {
      throw std::invalid_argument("rank " + std::to_string(r) +
                                  " would build something else than rank 0: " + diff +
                                  " (every rank needs the same data, model, weights and options)");
    }
  }
}

BuildReport run_as_rank(BuildGroup& g, const std::function<BuildReport()>& part) {
  const int rank = g.rank();
  if (g.world() < 1 || rank < 0 || rank >= g.world()) {
    throw std::invalid_argument("rank " + std::to_string(rank) + " is not in a group of " +
                                std::to_string(g.world()));
  }
  try {
    return part();
  } catch (const std::exception& e) {
    // A rank that only learnt of another's failure reports nothing new: the first one stands.
    g.fail("rank " + std::to_string(rank) + ": " + first_line(e.what()));
    throw;
  }
}

namespace {

// A part of the keys as gathered_keys publishes it: a line of JSON (the sample count, the
// skipped files), then the keys' 16 bytes each.
std::string key_part_text(const SampleKeys& part, int64_t samples) {
  json skipped = json::array();
  for (const auto& [position, line] : part.skipped) skipped.push_back({position, line});
  std::string text = json{{"samples", samples}, {"skipped", skipped}}.dump() + "\n";
  text.reserve(text.size() + part.keys.size() * Key::kBytes);
  char bytes[Key::kBytes];
  for (const Key& k : part.keys) {
    k.to_bytes(bytes);
    text.append(bytes, Key::kBytes);
  }
  return text;
}

// Rank `rank`'s part (key_part_text's) of a split of `samples` in `world` parts, read back into
// *whole; `me` is the reading rank, whose split has `samples`.
void add_key_part(const std::string& text, int rank, int world, int me, int64_t samples,
                  SampleKeys* whole) {
  const std::string whose = "rank " + std::to_string(rank) + "'s keys";
  const size_t line = text.find('\n');
  const json head = json::parse(text.substr(0, line), nullptr, /*allow_exceptions=*/false);
  if (line == std::string::npos || !head.is_object() || !head["samples"].is_number_integer() ||
      !head["skipped"].is_array()) {
    throw std::runtime_error(whose + " are malformed");
  }
  const int64_t theirs = head["samples"].get<int64_t>();
  if (theirs != samples) {  // said alike by either rank: the lower one first
    const bool first = rank < me;
    throw std::runtime_error(
        "rank " + std::to_string(first ? rank : me) + " lists " +
        std::to_string(first ? theirs : samples) + " samples, rank " +
        std::to_string(first ? me : rank) + " " + std::to_string(first ? samples : theirs) +
        " (every rank needs the same data, model, weights and options)");
  }
  const int64_t count = samples > rank ? (samples - rank + world - 1) / world : 0;
  if (text.size() - line - 1 != static_cast<size_t>(count) * Key::kBytes) {
    throw std::runtime_error(whose + " are malformed");
  }
  for (int64_t j = 0; j < count; ++j) {
    const std::string_view bytes(text.data() + line + 1 + j * Key::kBytes, Key::kBytes);
    Key::from_bytes(bytes, &whole->keys[static_cast<size_t>(rank + j * world)]);
  }
  for (const json& s : head["skipped"]) {
    const int64_t p = s.at(0).get<int64_t>();
    if (p < 0 || p >= samples || p % world != rank) {
      throw std::runtime_error(whose + " are malformed");
    }
    whole->skipped.emplace_back(p, s.at(1).get<std::string>());
  }
}

}  // namespace

SampleKeys gathered_keys(SampleKeys own, int64_t samples, BuildGroup& g) {
  g.set(board("keys", g.rank()), key_part_text(own, samples));
  SampleKeys whole;
  whole.positions.resize(static_cast<size_t>(samples));
  for (int64_t p = 0; p < samples; ++p) whole.positions[static_cast<size_t>(p)] = p;
  whole.keys.resize(static_cast<size_t>(samples));
  for (size_t j = 0; j < own.positions.size(); ++j) {
    whole.keys.at(static_cast<size_t>(own.positions[j])) = own.keys[j];
  }
  whole.skipped = std::move(own.skipped);
  for (int r = 0; r < g.world(); ++r) {
    if (r == g.rank()) continue;
    add_key_part(g.wait(board("keys", r), r), r, g.world(), g.rank(), samples, &whole);
  }
  std::sort(whole.skipped.begin(), whole.skipped.end());
  return whole;
}

BuildReport report_from_json(const std::string& text, const std::string& whose) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw std::runtime_error(whose + " is malformed");
  BuildReport r;
  r.cache_dir = j.value("cache", "");
  r.split = j.value("split", "");
  r.samples = j.value("samples", int64_t{0});
  r.unique = j.value("unique", int64_t{0});
  r.computed = j.value("computed", int64_t{0});
  r.skipped = j.value("skipped", int64_t{0});
  r.index_written = j.value("index_written", int64_t{0});
  r.files_left_out = j.value("files_left_out", int64_t{0});
  r.bytes = j.value("bytes", int64_t{0});
  r.records = j.value("records", int64_t{0});
  r.cache_records = j.value("cache_records", int64_t{0});
  r.seconds = j.value("seconds", 0.0);
  r.prefix_seconds = j.value("prefix_seconds", 0.0);
  r.samples_per_s = j.value("samples_per_s", 0.0);
  r.ranks = j.value("ranks", 1);
  r.views = j.value("views", int64_t{0});
  r.prefix_share = j.value("prefix_share", -1.0);
  r.shards = j.value("shards", 0);
  r.shard_index = j.value("shard", 0);
  if (j.contains("stage_seconds") && j["stage_seconds"].is_object()) {
    for (const auto& [name, field] : stage_second_fields())
      r.stage_seconds.*field = j["stage_seconds"].value(name, 0.0);
  }
  if (j.contains("per_shard") && j["per_shard"].is_array()) {
    for (const json& s : j["per_shard"]) r.per_shard.push_back(report_from_json(s.dump(), whose));
  }
  return r;
}

BuildReport merged_reports(std::vector<BuildReport> shards, int own) {
  if (own < 0 || own >= static_cast<int>(shards.size())) {
    throw std::invalid_argument("shard " + std::to_string(own) + " of " +
                                std::to_string(shards.size()) + " reports");
  }
  BuildReport job = shards[static_cast<size_t>(own)];
  job.samples = job.unique = job.computed = job.skipped = job.index_written = 0;
  job.files_left_out = job.bytes = job.records = job.cache_records = 0;
  job.seconds = job.prefix_seconds = 0;
  job.stage_seconds = BuildStageSeconds();  // each process's own, in per_shard
  for (const BuildReport& s : shards) {
    job.samples += s.samples;
    job.unique += s.unique;
    job.computed += s.computed;
    job.skipped += s.skipped;
    job.index_written += s.index_written;
    job.files_left_out = std::max(job.files_left_out, s.files_left_out);  // the same files
    job.bytes += s.bytes;
    job.records += s.records;
    job.cache_records += s.cache_records;
    job.seconds = std::max(job.seconds, s.seconds);
    job.prefix_seconds += s.prefix_seconds;
  }
  job.samples_per_s = job.seconds > 0 ? static_cast<double>(job.samples) / job.seconds : 0;
  job.ranks = static_cast<int>(shards.size());
  job.per_shard = std::move(shards);
  return job;
}

std::vector<int64_t> sharded_key_positions(int64_t samples, int part, int parts) {
  if (part < 0 || part >= parts) {
    throw std::invalid_argument("part " + std::to_string(part) + " of " + std::to_string(parts));
  }
  constexpr int64_t kSpotChecks = 64;  // samples of the other parts a rank keys too
  const int64_t step = std::max<int64_t>(1, samples / kSpotChecks);
  std::vector<int64_t> read;
  for (int64_t p = 0; p < samples; ++p) {
    if (p % parts == part || (p % step == 0 && p / step < kSpotChecks)) read.push_back(p);
  }
  return read;
}

std::string merged_shard_reports(const std::vector<std::string>& reports, int own) {
  std::vector<BuildReport> shards;
  for (size_t r = 0; r < reports.size(); ++r) {
    shards.push_back(report_from_json(reports[r], "shard " + std::to_string(r) + "'s report"));
  }
  return merged_reports(std::move(shards), own).to_json();
}

}  // namespace recycle
