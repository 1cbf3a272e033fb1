#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "base/strings.h"
#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "cache/damaged_records.h"
#include "cache/open_existing.h"
#include "cache/record.h"
#include "cache/shard_rule.h"  // shard_words
#include "cache/split_writer.h"
#include "recycle/cache.h"

namespace recycle {

std::string InspectReport::to_json() const {
  nlohmann::json j = {{"cache", cache_dir},
                      {"model", manifest.model},
                      {"split_at", manifest.split_at},
                      {"recycle", manifest.recycle_ratio()},
                      {"keyer", manifest.keyer},
                      {"codec", codec_name(manifest.codec)},
                      {"prefix_precision", manifest.prefix_precision_name()},
                      {"classifier", manifest.classifier},
                      {"preprocess", manifest.preprocess},
                      {"fingerprint", manifest.fingerprint},
                      {"record_shapes", layout_shapes(manifest.layout())},
                      {"record_layout", manifest.record_layout_to_json()},
                      {"classes", manifest.class_names},
                      {"weights_file", manifest.weights_file},
                      {"records", manifest.records},
                      {"orphans", orphans},
                      {"record_bytes", manifest.record_bytes},
                      {"bytes", disk_bytes},
                      {"splits", manifest.splits_to_json()},
                      {"complete", [&] {
                         for (const auto& [n, s] : manifest.splits) {
                           if (!s.complete) return false;
                         }
                         return true;
                       }()}};
  if (verified) {
    j["checked"] = checked;
    j["corrupt"] = corrupt;
    j["damaged_files"] = damaged_files;
    j["problems"] = problems;
    j["repair"] = repair;
  }
  return j.dump();
}

namespace {

// ": 0=neg 1=pos" (id=name, the label map) for up to 20 classes whose names are not just their
// ids; "" otherwise. A name's control characters are escaped (one line per field).
std::string class_list(const std::vector<std::string>& names) {
  bool plain = true;
  for (size_t i = 0; i < names.size(); ++i) plain = plain && names[i] == std::to_string(i);
  if (plain || names.size() > 20) return "";
  std::string out = ":";
  for (size_t i = 0; i < names.size(); ++i)
    out += " " + std::to_string(i) + "=" + printable(names[i]);
  return out;
}

}  // namespace

std::string InspectReport::to_text() const {
  std::ostringstream out;
  out << "cache      " << cache_dir << "\n"
      << "model      " << manifest.model << "\n"
      << "split at   " << manifest.split_at << " (" << manifest.prefix_blocks << "/"
      << manifest.total_blocks << " blocks recycled)\n"
      << "keyer      " << manifest.keyer << "\n"
      << "codec      " << codec_name(manifest.codec) << "\n"
      << (manifest.prefix_precision.empty()
              ? ""
              : "precision  " + manifest.prefix_precision + " (the prefix ran under autocast)\n")
      << "classes    " << manifest.class_names.size() << class_list(manifest.class_names) << "\n"
      << "preprocess " << manifest.preprocess << "\n"
      << "records    " << manifest.records << " (" << manifest.record_bytes << " bytes encoded, "
      << disk_bytes << " bytes on disk)\n"
      << "orphans    " << orphans << " records no index entry points to"
      << (orphans ? " (recycle-inspect --compact deletes them)" : "") << "\n";
  for (const auto& [name, s] : manifest.splits) {
    out << "split      " << printable(name) << ": " << s.samples << " samples, " << s.unique
        << " unique, " << (s.complete ? "complete" : "INCOMPLETE") << " (" << printable(s.data)
        << ")";
    if (s.views > 0) out << ", " << s.views << " views of " << s.augment;
    if (s.shard.sharded()) {
      out << ", " << shard_words(s.shard) << " (" << s.shard.split_samples << " samples in all)";
    }
    out << "\n";
  }
  if (verified) {
    out << "verify     " << checked << " records checked, " << corrupt << " corrupt, "
        << damaged_files << " damaged files, " << problems.size() << " problems\n";
    for (const auto& p : problems) out << "  " << printable(p) << "\n";
    if (!repair.empty()) out << "repair     " << printable(repair) << "\n";
  }
  return out.str();
}

namespace {

// Every key the manifest's splits point to. Problems with an index go to `problems`.
std::unordered_set<Key, KeyHash> referenced_keys(const ActivationStore& store, const Manifest& m,
                                                 std::vector<std::string>* problems) {
  std::unordered_set<Key, KeyHash> keys;
  for (const auto& [name, info] : m.splits) {
    std::vector<IndexEntry> entries;
    const Status st = store.read_split_index(name, info, &entries);
    if (!st.ok()) problems->push_back("split " + name + ": " + st.to_string());
    for (const IndexEntry& e : entries) {
      for (const Key& k : info.record_keys(e.key)) keys.insert(k);
    }
  }
  return keys;
}

// A record parsed and checked against the layout, its float values finite: OK, or why not.
Status check_record(std::string_view bytes, const RecordLayout& layout,
                    std::vector<RecordTensor>* parts) {
  Status rs = parse_record(bytes, parts);
  if (rs.ok()) rs = check_record_layout(*parts, layout);
  // A value that is not finite (fp32, fp16 or bf16: written by a version that did not refuse
  // them, or damaged in a way its checksum cannot tell) would make training's loss NaN.
  for (size_t t = 0; rs.ok() && t < parts->size(); ++t) {
    const RecordTensor& part = (*parts)[t];
    if (part.dtype != Dtype::kFloat32) continue;
    const std::string bad =
        check_values(part.codec, part.payload, static_cast<size_t>(part.numel()));
    if (!bad.empty()) {
      const std::string name = t < layout.size() ? " '" + layout[t].name + "'" : "";
      rs = Status::corruption("tensor " + std::to_string(t) + name + ": " + bad +
                              " (values that are not finite, stored by a version of recycle "
                              "that did not refuse them: rebuild the cache)");
    }
  }
  return rs;
}

// Every split's index against the records read (`keys`): entries whose record is missing, and
// labels outside the cache's classes, into *problems; the missing records' keys into *missing.
void check_split_indexes(const ActivationStore& store, const Manifest& m,
                         const std::unordered_set<Key, KeyHash>& keys,
                         std::vector<std::string>* problems, std::vector<Key>* missing_keys) {
  for (const auto& [name, info] : m.splits) {
    std::vector<IndexEntry> entries;
    if (!store.read_index(name, &entries).ok()) continue;  // reported by referenced_keys
    int64_t missing = 0;
    for (const IndexEntry& e : entries) {
      for (const Key& k : info.record_keys(e.key)) {
        if (keys.count(k)) continue;
        ++missing;
        missing_keys->push_back(k);
      }
      if (e.label < 0 || e.label >= static_cast<int64_t>(m.class_names.size())) {
        problems->push_back("split " + name + ": label " + std::to_string(e.label) +
                            " out of range");
        break;
      }
    }
    if (missing) {
      problems->push_back("split " + name + ": " + std::to_string(missing) +
                          (info.views > 0 ? " views of its index entries have no record"
                                          : " index entries point to no record"));
    }
  }
}

// Writes the damaged-records list anew (removes it when nothing is damaged): what the report
// tells the user to do about them. `damaged` may name a record twice (missing for two splits).
std::string note_damaged(const std::string& dir, std::vector<Key> damaged) {
  std::sort(damaged.begin(), damaged.end());
  damaged.erase(std::unique(damaged.begin(), damaged.end()), damaged.end());
  const size_t n = damaged.size();
  std::string real;
  Status st = resolve_cache_path(dir, &real);
  if (st.ok()) st = write_damaged_records(real, std::move(damaged));
  if (n == 0) return "";
  const std::string records = n == 1 ? "the damaged record" : "the " + std::to_string(n) +
                                                                  " damaged records";
  if (!st.ok()) {
    return records + " could not be noted for the next build (" + st.to_string() +
           "): rebuild the splits that point to " + (n == 1 ? "it" : "them") + " with --rebuild";
  }
  return records + (n == 1 ? " is" : " are") + " noted in " + dir + "/" + kDamagedRecordsName +
         ": rerun the build of " + (n == 1 ? "its split" : "their splits") +
         " (the same command, without --rebuild) to compute " + (n == 1 ? "it" : "them") +
         " again";
}

}  // namespace

InspectReport inspect_cache(const std::string& dir, bool verify) {
  InspectReport report;
  report.cache_dir = dir;
  std::unique_ptr<ActivationStore> store = open_cache_for_read(dir, &report.manifest);
  Status st;
  report.disk_bytes = store->disk_bytes();
  const Manifest& m = report.manifest;
  std::vector<std::string> index_problems;
  const std::unordered_set<Key, KeyHash> referenced = referenced_keys(*store, m, &index_problems);
  report.orphans = std::max<int64_t>(0, m.records - static_cast<int64_t>(referenced.size()));
  if (!verify) return report;

  report.verified = true;
  report.orphans = 0;
  st = store->verify_files();
  if (!st.ok()) {
    report.damaged_files = 1;
    report.problems.push_back("file check: " + st.to_string());
  }

  std::unordered_set<Key, KeyHash> keys;
  std::vector<Key> damaged;  // for the damaged-records list
  std::vector<RecordTensor> parts;
  const RecordLayout layout = m.layout();
  st = store->for_each_record([&](const Key& key, std::string_view bytes) {
    ++report.checked;
    keys.insert(key);
    if (!referenced.count(key)) ++report.orphans;
    const Status rs = check_record(bytes, layout, &parts);
    if (!rs.ok()) {
      ++report.corrupt;
      damaged.push_back(key);
      report.problems.push_back("record " + key.to_hex() + ": " + rs.to_string());
    }
    return true;
  });
  if (!st.ok()) {
    // Reading in key order stopped at damage (a blob record that fails its CRC, a table block):
    // every record a split points to that was not reached is then read alone, so the damage is
    // counted and named record by record, not as everything after it.
    for (const Key& key : referenced) {
      if (keys.count(key)) continue;
      std::string bytes;
      const Status rs = store->get_record(key, &bytes);
      if (rs.is_not_found()) continue;  // an index entry without its record: said below
      keys.insert(key);
      ++report.checked;
      if (!rs.ok()) {  // get_record's status names the record
        damaged.push_back(key);
        report.problems.push_back(rs.to_string());
        continue;
      }
      const Status cs = check_record(bytes, layout, &parts);
      if (!cs.ok()) {
        damaged.push_back(key);
        report.problems.push_back("record " + key.to_hex() + ": " + cs.to_string());
      }
    }
    const int64_t alone = static_cast<int64_t>(damaged.size()) - report.corrupt;
    report.corrupt += alone;
    report.problems.push_back("reading the records in order stopped at damage (" + st.to_string() +
                              "); the records the splits point to were then read one by one: " +
                              std::to_string(alone) + " of them damaged");
  } else if (report.checked != m.records) {
    report.problems.push_back("the cache holds " + std::to_string(report.checked) +
                              " records, its manifest says " + std::to_string(m.records));
  }
  report.problems.insert(report.problems.end(), index_problems.begin(), index_problems.end());
  // Records an index points to and the store lacks are computed again as damaged ones are.
  check_split_indexes(*store, m, keys, &report.problems, &damaged);
  report.repair = note_damaged(dir, std::move(damaged));
  return report;
}

std::string CompactReport::to_json() const {
  return nlohmann::json{
      {"removed", removed}, {"removed_bytes", removed_bytes}, {"records", records}}
      .dump();
}

CompactReport compact_cache(const std::string& dir) {
  StoreOptions so;
  so.create_if_missing = false;
  std::unique_ptr<ActivationStore> store;
  ActivationStore::open(dir, so, &store).throw_if_error();
  Manifest m;
  store->read_manifest(&m).throw_if_error();
  std::vector<std::string> problems;
  const std::unordered_set<Key, KeyHash> referenced = referenced_keys(*store, m, &problems);
  if (!problems.empty()) {
    throw std::runtime_error("not compacting cache " + dir + ": " + problems[0]);
  }
  CompactReport report;
  std::vector<std::pair<Key, int64_t>> orphans;
  store
      ->for_each_record([&](const Key& key, std::string_view bytes) {
        if (!referenced.count(key)) orphans.emplace_back(key, static_cast<int64_t>(bytes.size()));
        return true;
      })
      .throw_if_error();
  constexpr size_t kPerBatch = 1024;
  SplitWriter writer(store.get(), &m, "");  // records and counts only
  for (size_t begin = 0; begin < orphans.size(); begin += kPerBatch) {
    // Counts change in the same batch as the records, so a kill leaves them consistent.
    StagedWrite w = writer.stage();
    for (size_t i = begin; i < std::min(orphans.size(), begin + kPerBatch); ++i) {
      w.delete_record(orphans[i].first, orphans[i].second);
    }
    report.removed -= w.records;
    report.removed_bytes += w.deleted_bytes;
    writer.seal(&w);
    writer.write(&w);
  }
  writer.finish();
  store->compact_records().throw_if_error();
  report.records = m.records;
  return report;
}

}  // namespace recycle
