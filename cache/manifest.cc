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
  j["record_layout"] = record_layout_to_json();
  j["record_shapes"] = layout_shapes(layout());
  j["class_names"] = class_names;
  j["classifier"] = classifier;
  j["records"] = records;
  j["record_bytes"] = record_bytes;
  j["splits"] = splits_to_json();
  return j.dump(indent);
}

RecordLayout Manifest::layout() const {
  return record_layout.empty() ? layout_from_shapes(record_shapes, codec) : record_layout;
}

json Manifest::record_layout_to_json() const {
  json out = json::array();
  for (const TensorLayout& t : layout()) {
    out.push_back(
        {{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"codec", t.codec}});
  }
  return out;
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

// A JSON array of integers, each >= 1 (or -1, a variable dimension, when allowed).
bool read_shape(const json& shape, bool allow_variable, std::vector<int64_t>* dims) {
  if (!shape.is_array()) return false;
  for (const json& d : shape) {
    if (!d.is_number_integer()) return false;
    if (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return false;
    const int64_t v = d.get<int64_t>();
    if (v < 1 && !(allow_variable && v == kVariableDim)) return false;
    dims->push_back(v);
  }
  return true;
}

// Sets m->record_layout from j's "record_layout", checked and consistent with record_shapes
// (already read), or, in a manifest from before layouts, derived from record_shapes and codec.
Status read_layout(const json& j, Manifest* m) {
  if (!j.contains("record_layout")) {
    m->record_layout = layout_from_shapes(m->record_shapes, m->codec);
    const Status st = check_layout(m->record_layout);
    return st.ok() ? st : Status::corruption("manifest: " + st.message());
  }
  const json& arr = j.at("record_layout");
  if (!arr.is_array()) return Status::corruption("manifest: record_layout is not a list");
  RecordLayout layout;
  for (const json& t : arr) {
    const std::string which = "manifest: record layout tensor " + std::to_string(layout.size());
    if (!t.is_object()) return Status::corruption(which + " is not an object");
    TensorLayout tl;
    tl.name = t.at("name").get<std::string>();
    const std::string dtype = t.at("dtype").get<std::string>();
    if (!parse_dtype(dtype, &tl.dtype)) {
      return Status::corruption(which + " has an unknown dtype '" + dtype +
                                "' (float32, int64, int32, uint8, bool)");
    }
    if (!read_shape(t.at("shape"), true, &tl.shape)) {
      return Status::corruption(which + ": its shape is not positive integers or -1");
    }
    // An exact tensor may leave its codec out or empty: it is "raw".
    tl.codec = t.contains("codec") ? t.at("codec").get<std::string>() : "";
    if (tl.dtype != Dtype::kFloat32 && tl.codec.empty()) tl.codec = kRawCodecName;
    layout.push_back(std::move(tl));
  }
  const Status st = check_layout(layout);
  if (!st.ok()) return Status::corruption("manifest: " + st.message());
  if (layout_shapes(layout) != m->record_shapes) {
    return Status::corruption("manifest: record_shapes disagree with record_layout (" +
                              layout_string(layout) + ")");
  }
  m->record_layout = std::move(layout);
  return Status();
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
    if (j.contains("input_shape") && !read_shape(j.at("input_shape"), false, &m.input_shape)) {
      return Status::corruption("manifest: the input shape is not positive integers");
    }
    const bool has_layout = j.contains("record_layout");
    for (const json& shape : j.at("record_shapes")) {
      std::vector<int64_t> dims;
      if (!read_shape(shape, has_layout, &dims)) {
        return Status::corruption(has_layout
                                      ? "manifest: a record shape is not positive integers or -1"
                                      : "manifest: a record shape is not positive integers");
      }
      m.record_shapes.push_back(dims);
    }
    const Status layout_st = read_layout(j, &m);
    if (!layout_st.ok()) return layout_st;
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

namespace {

// A layout as identity compares it: a float tensor stored with the manifest's own codec has
// its codec replaced by "=", so that a codec change is named once, by the codec line.
RecordLayout layout_identity(RecordLayout layout, const std::string& manifest_codec) {
  for (TensorLayout& t : layout) {
    if (t.dtype == Dtype::kFloat32 && t.codec == manifest_codec) t.codec = "=";
  }
  return layout;
}

}  // namespace

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
  const RecordLayout have_layout = layout(), want_layout = requested.layout();
  if (layout_identity(have_layout, codec) != layout_identity(want_layout, requested.codec)) {
    out.push_back("record layout: the cache has " + layout_string(have_layout) +
                  ", this run asks for " + layout_string(want_layout));
  }
  return out;
}

std::string mismatch_message(const std::string& dir, const std::vector<std::string>& differences,
                             const std::string& hint) {
  std::string msg = "cache " + dir + " was built for another setup: ";
  for (size_t i = 0; i < differences.size(); ++i) msg += (i ? "; " : "") + differences[i];
  return msg + " (" + hint + ")";
}

}  // namespace recycle
