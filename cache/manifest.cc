#include "cache/manifest.h"

#include <cstdint>
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
  if (!input_shape.empty()) j["input_shape"] = input_shape;
  j["record_shapes"] = record_shapes;
  j["class_names"] = class_names;
  j["classifier"] = classifier;
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
  }
  return s;
}

namespace {

// An integer field: refuses floats and out-of-range numbers (a cast would be undefined).
int64_t get_int(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) {
    throw json::type_error::create(302, std::string("field ") + key + " is not an integer", &v);
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    throw json::type_error::create(302, std::string("field ") + key + " is out of range", &v);
  }
  return v.get<int64_t>();
}

}  // namespace

Status Manifest::from_json_string(const std::string& text, Manifest* out) {
  try {
    const json j = json::parse(text);
    Manifest m;
    const int64_t version = get_int(j, "format_version");
    m.format_version = version == kCacheFormatVersion ? kCacheFormatVersion : -1;
    if (m.format_version != kCacheFormatVersion) {
      return Status::mismatch("cache format version " + std::to_string(version) +
                              ", this build reads version " +
                              std::to_string(kCacheFormatVersion));
    }
    m.model = j.at("model").get<std::string>();
    m.fingerprint = j.at("fingerprint").get<std::string>();
    m.split_at = j.at("split_at").get<std::string>();
    m.prefix_blocks = get_int(j, "prefix_blocks");
    m.total_blocks = get_int(j, "total_blocks");
    m.keyer = j.at("keyer").get<std::string>();
    m.codec = j.at("codec").get<std::string>();
    m.preprocess = j.at("preprocess").get<std::string>();
    auto read_shape = [](const json& shape, std::vector<int64_t>* dims) {
      if (!shape.is_array()) return false;
      for (const json& d : shape) {
        if (!d.is_number_integer() || d.get<int64_t>() < 1) return false;
        dims->push_back(d.get<int64_t>());
      }
      return true;
    };
    if (j.contains("input_shape") && !read_shape(j.at("input_shape"), &m.input_shape)) {
      return Status::corruption("manifest: the input shape is not positive integers");
    }
    for (const json& shape : j.at("record_shapes")) {
      std::vector<int64_t> dims;
      if (!read_shape(shape, &dims)) {
        return Status::corruption("manifest: a record shape is not positive integers");
      }
      m.record_shapes.push_back(dims);
    }
    m.class_names = j.at("class_names").get<std::vector<std::string>>();
    m.classifier = j.at("classifier").get<std::string>();
    m.records = get_int(j, "records");
    m.record_bytes = get_int(j, "record_bytes");
    for (const auto& [name, s] : j.at("splits").items()) {
      SplitInfo info;
      info.data = s.at("data").get<std::string>();
      info.samples = get_int(s, "samples");
      info.unique = get_int(s, "unique");
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
  if (!input_shape.empty() && !requested.input_shape.empty()) {
    check("input shape", shape_string(input_shape), shape_string(requested.input_shape));
  }
  return out;
}

std::string mismatch_message(const std::string& dir, const std::vector<std::string>& differences,
                             const std::string& hint) {
  std::string msg = "cache " + dir + " was built for another setup: ";
  for (size_t i = 0; i < differences.size(); ++i) msg += (i ? "; " : "") + differences[i];
  return msg + " (" + hint + ")";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "()" : s;
}

}  // namespace recycle
