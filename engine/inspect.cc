#include "engine/inspect.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "cache/activation_store.h"
#include "cache/record.h"

namespace recycle {

std::string InspectReport::to_json() const {
  nlohmann::json splits = nlohmann::json::object();
  for (const auto& [name, s] : manifest.splits) {
    splits[name] = {{"samples", s.samples}, {"unique", s.unique}, {"complete", s.complete},
                    {"data", s.data}};
  }
  nlohmann::json j = {{"cache", cache_dir},
                      {"model", manifest.model},
                      {"split_at", manifest.split_at},
                      {"recycle", manifest.recycle_ratio()},
                      {"keyer", manifest.keyer},
                      {"codec", manifest.codec},
                      {"fingerprint", manifest.fingerprint},
                      {"record_shapes", manifest.record_shapes},
                      {"classes", manifest.class_names},
                      {"records", manifest.records},
                      {"record_bytes", manifest.record_bytes},
                      {"bytes", disk_bytes},
                      {"splits", splits},
                      {"complete", [&] {
                         for (const auto& [n, s] : manifest.splits) {
                           if (!s.complete) return false;
                         }
                         return true;
                       }()}};
  if (verified) {
    j["checked"] = checked;
    j["corrupt"] = corrupt;
    j["problems"] = problems;
  }
  return j.dump();
}

std::string InspectReport::to_text() const {
  std::ostringstream out;
  out << "cache      " << cache_dir << "\n"
      << "model      " << manifest.model << "\n"
      << "split at   " << manifest.split_at << " (" << manifest.prefix_blocks << "/"
      << manifest.total_blocks << " blocks recycled)\n"
      << "keyer      " << manifest.keyer << "\n"
      << "codec      " << manifest.codec << "\n"
      << "classes    " << manifest.class_names.size() << "\n"
      << "records    " << manifest.records << " (" << manifest.record_bytes
      << " bytes encoded, " << disk_bytes << " bytes on disk)\n";
  for (const auto& [name, s] : manifest.splits) {
    out << "split      " << name << ": " << s.samples << " samples, " << s.unique << " unique, "
        << (s.complete ? "complete" : "INCOMPLETE") << " (" << s.data << ")\n";
  }
  if (verified) {
    out << "verify     " << checked << " records checked, " << corrupt << " corrupt, "
        << problems.size() << " problems\n";
    for (const auto& p : problems) out << "  " << p << "\n";
  }
  return out.str();
}

InspectReport inspect_cache(const std::string& dir, bool verify) {
  StoreOptions so;
  so.read_only = true;
  std::unique_ptr<ActivationStore> store;
  Status st = ActivationStore::open(dir, so, &store);
  st.throw_if_error();
  InspectReport report;
  report.cache_dir = dir;
  st = store->read_manifest(&report.manifest);
  st.throw_if_error();
  report.disk_bytes = store->disk_bytes();
  if (!verify) return report;

  report.verified = true;
  const Manifest& m = report.manifest;
  st = store->verify_files();
  if (!st.ok()) report.problems.push_back("file check: " + st.to_string());

  std::unordered_set<Key, KeyHash> keys;
  std::vector<RecordTensor> parts;
  st = store->for_each_record([&](const Key& key, std::string_view bytes) {
    ++report.checked;
    keys.insert(key);
    Status rs = parse_record(bytes, &parts);
    if (rs.ok()) {
      std::vector<std::vector<int64_t>> shapes;
      for (const auto& p : parts) shapes.push_back(p.shape);
      if (shapes != m.record_shapes) rs = Status::corruption("shape differs from the manifest");
      for (const auto& p : parts) {
        if (codec_name(p.codec) != m.codec) rs = Status::corruption("codec differs from the manifest");
      }
    }
    if (!rs.ok()) {
      ++report.corrupt;
      report.problems.push_back("record " + key.to_hex() + ": " + rs.to_string());
    }
    return true;
  });
  if (!st.ok()) report.problems.push_back("reading records: " + st.to_string());
  if (report.checked != m.records) {
    report.problems.push_back("the cache holds " + std::to_string(report.checked) +
                              " records, its manifest says " + std::to_string(m.records));
  }
  for (const auto& [name, info] : m.splits) {
    std::vector<IndexEntry> entries;
    st = store->read_index(name, &entries);
    if (!st.ok()) {
      report.problems.push_back("split " + name + ": " + st.to_string());
      continue;
    }
    if (info.complete && static_cast<int64_t>(entries.size()) != info.samples) {
      report.problems.push_back("split " + name + " has " + std::to_string(entries.size()) +
                                " index entries, its manifest says " + std::to_string(info.samples));
    }
    int64_t missing = 0;
    for (const IndexEntry& e : entries) {
      if (!keys.count(e.key)) ++missing;
      if (e.label < 0 || e.label >= static_cast<int64_t>(m.class_names.size())) {
        report.problems.push_back("split " + name + ": label " + std::to_string(e.label) +
                                  " out of range");
        break;
      }
    }
    if (missing) {
      report.problems.push_back("split " + name + ": " + std::to_string(missing) +
                                " index entries point to no record");
    }
  }
  return report;
}

}  // namespace recycle
