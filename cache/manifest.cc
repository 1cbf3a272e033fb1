#include "cache/manifest.h"

#include <nlohmann/json.hpp>

namespace recycle {

using nlohmann::json;

std::string Manifest::to_json_string(int indent) const {
  json j;
  j["format_version"] = format_version;
  j["model"] = model;
  j["fingerprint"] = fingerprint;
  j["split_at"] = split_at;
  j["prefix_blocks"] = prefix_blocks;
  j["total_blocks"] = total_blocks;
  j["keyer"] = keyer;
  j["codec"] = codec;
  j["preprocess"] = preprocess;
  j["record_shapes"] = record_shapes;
  j["class_names"] = class_names;
  j["classifier"] = classifier;
  j["records"] = records;
  j["record_bytes"] = record_bytes;
  json s = json::object();
  for (const auto& [name, info] : splits) {
    s[name] = {{"data", info.data},
               {"samples", info.samples},
               {"unique", info.unique},
               {"complete", info.complete}};
  }
  j["splits"] = s;
  return j.dump(indent);
}

Status Manifest::from_json_string(const std::string& text, Manifest* out) {
  try {
    const json j = json::parse(text);
    Manifest m;
    m.format_version = j.at("format_version").get<int>();
    if (m.format_version != kCacheFormatVersion) {
      return Status::mismatch("cache format version " + std::to_string(m.format_version) +
                              ", this build reads version " +
                              std::to_string(kCacheFormatVersion));
    }
    m.model = j.at("model").get<std::string>();
    m.fingerprint = j.at("fingerprint").get<std::string>();
    m.split_at = j.at("split_at").get<std::string>();
    m.prefix_blocks = j.at("prefix_blocks").get<int64_t>();
    m.total_blocks = j.at("total_blocks").get<int64_t>();
    m.keyer = j.at("keyer").get<std::string>();
    m.codec = j.at("codec").get<std::string>();
    m.preprocess = j.at("preprocess").get<std::string>();
    m.record_shapes = j.at("record_shapes").get<std::vector<std::vector<int64_t>>>();
    m.class_names = j.at("class_names").get<std::vector<std::string>>();
    m.classifier = j.at("classifier").get<std::string>();
    m.records = j.at("records").get<int64_t>();
    m.record_bytes = j.at("record_bytes").get<int64_t>();
    for (const auto& [name, s] : j.at("splits").items()) {
      SplitInfo info;
      info.data = s.at("data").get<std::string>();
      info.samples = s.at("samples").get<int64_t>();
      info.unique = s.at("unique").get<int64_t>();
      info.complete = s.at("complete").get<bool>();
      m.splits[name] = info;
    }
    if (m.prefix_blocks < 0 || m.total_blocks < 0 || m.prefix_blocks > m.total_blocks) {
      return Status::corruption("manifest has an impossible split point");
    }
    *out = std::move(m);
    return Status();
  } catch (const json::exception& e) {
    return Status::corruption(std::string("manifest is not valid: ") + e.what());
  }
}

std::vector<std::string> Manifest::identity_differences(const Manifest& requested) const {
  std::vector<std::string> out;
  auto check = [&](const char* field, const std::string& have, const std::string& want) {
    if (have != want) {
      out.push_back(std::string(field) + ": the cache has " + have + ", this run asks for " + want);
    }
  };
  check("format version", std::to_string(format_version), std::to_string(requested.format_version));
  check("model", model, requested.model);
  check("prefix fingerprint (weights)", fingerprint, requested.fingerprint);
  check("split point", split_at + " (" + std::to_string(prefix_blocks) + "/" +
                           std::to_string(total_blocks) + " blocks)",
        requested.split_at + " (" + std::to_string(requested.prefix_blocks) + "/" +
            std::to_string(requested.total_blocks) + " blocks)");
  check("keyer", keyer, requested.keyer);
  check("codec", codec, requested.codec);
  check("preprocessing", preprocess, requested.preprocess);
  return out;
}

std::string mismatch_message(const std::string& dir, const std::vector<std::string>& differences) {
  std::string msg = "cache " + dir + " was built for another setup: ";
  for (size_t i = 0; i < differences.size(); ++i) msg += (i ? "; " : "") + differences[i];
  return msg + " (use --rebuild to start over)";
}

}  // namespace recycle
