#include "cache/manifest.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "cache/json_fields.h"
#include "keyers/view_key.h"

namespace recycle {

using nlohmann::json;

std::string Manifest::to_json_string(int indent) const {
  json j;
  identity().to_json(&j);
  j["class_names"] = class_names;
  j["classifier"] = classifier;
  if (!weights_file.empty()) j["weights_file"] = weights_file;
  if (!derived_blocks.empty()) {
    j["derived_from"] = {{"cache", derived_from}, {"blocks", derived_blocks}};
  }
  j["records"] = records;
  j["record_bytes"] = record_bytes;
  j["splits"] = splits_to_json();
  return j.dump(indent);
}

json Manifest::splits_to_json() const {
  json s = json::object();
  for (const auto& [name, info] : splits) {
    s[name] = {{"data", info.data},
               {"samples", info.samples},
               {"unique", info.unique},
               {"complete", info.complete}};
    if (!info.classes.empty()) s[name]["classes"] = info.classes;
    if (info.views > 0) {
      s[name]["augment"] = info.augment;
      s[name]["views"] = info.views;
    }
    if (info.shard.sharded()) {
      s[name]["shard"] = {{"index", info.shard.index},
                          {"count", info.shard.count},
                          {"rule", info.shard.rule},
                          {"split_samples", info.shard.split_samples}};
    }
  }
  return s;
}

namespace {

// The --classes a split's data description names (engine/data/dataset.cc writes
// "SPEC split=S classes=C limit=N ..."): what a manifest written before SplitInfo::classes
// existed says of them. "" when it names none.
std::string classes_in_description(const std::string& data) {
  const std::string marker = " classes=";
  const size_t at = data.find(marker);
  if (at == std::string::npos) return "";
  const size_t from = at + marker.size();
  return data.substr(from, data.find(' ', from) - from);
}

}  // namespace

Status Manifest::from_json_string(const std::string& text, Manifest* out) {
  try {
    const json j = json::parse(text);
    Manifest m;
    const Status identity_st = CacheIdentity::from_json(j, &m.identity());
    if (!identity_st.ok()) return identity_st;
    m.class_names = j.at("class_names").get<std::vector<std::string>>();
    m.classifier = j.at("classifier").get<std::string>();
    m.weights_file = j.value("weights_file", std::string());
    if (j.contains("derived_from")) {
      const json& d = j.at("derived_from");
      m.derived_from = d.at("cache").get<std::string>();
      m.derived_blocks = d.at("blocks").get<std::vector<int64_t>>();
      if (m.derived_blocks.empty() || m.derived_blocks.back() != m.prefix_blocks) {
        return Status::corruption("manifest: derived_from's blocks do not end at the prefix's");
      }
    }
    m.records = json_int(j, "records");
    m.record_bytes = json_int(j, "record_bytes");
    for (const auto& [name, s] : j.at("splits").items()) {
      SplitInfo info;
      info.data = s.at("data").get<std::string>();
      info.classes = s.contains("classes") ? s.at("classes").get<std::string>()
                                           : classes_in_description(info.data);
      info.samples = json_int(s, "samples");
      info.unique = json_int(s, "unique");
      info.complete = s.at("complete").get<bool>();
      if (s.contains("views")) {
        info.views = json_int(s, "views");
        info.augment = s.at("augment").get<std::string>();
        if (info.views < 1 || info.augment.empty()) {
          return Status::corruption("manifest: split " + name + " has views " +
                                    std::to_string(info.views) + " of augmentation '" +
                                    info.augment + "'");
        }
      }
      if (s.contains("shard")) {
        const json& sh = s.at("shard");
        info.shard.index = json_int(sh, "index");
        info.shard.count = json_int(sh, "count");
        info.shard.rule = sh.at("rule").get<std::string>();
        info.shard.split_samples = json_int(sh, "split_samples");
        if (info.shard.count < 1 || info.shard.index < 0 ||
            info.shard.index >= info.shard.count || info.shard.split_samples < info.samples) {
          return Status::corruption("manifest: split " + name + " is shard " +
                                    std::to_string(info.shard.index) + " of " +
                                    std::to_string(info.shard.count) + " of " +
                                    std::to_string(info.shard.split_samples) + " samples");
        }
      }
      m.splits[name] = info;
    }
    *out = std::move(m);
    return Status();
  } catch (const json::exception& e) {
    return Status::corruption(std::string("manifest is not valid: ") + e.what());
  }
}

std::vector<Key> SplitInfo::record_keys(const Key& key) const {
  if (views == 0) return {key};
  std::vector<Key> out;
  out.reserve(static_cast<size_t>(views));
  for (int64_t v = 0; v < views; ++v) out.push_back(view_key(key, augment, v));
  return out;
}

std::string mismatch_message(const std::string& dir, const std::vector<std::string>& differences,
                             const std::string& hint) {
  std::string msg = "cache " + dir + " was built for another setup: ";
  for (size_t i = 0; i < differences.size(); ++i) msg += (i ? "; " : "") + differences[i];
  return msg + " (" + hint + ")";
}

}  // namespace recycle
