#include <cstdint>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/strings.h"  // join
#include "cache/codec.h"   // parse_codec
#include "cache/json_fields.h"
#include "cache/manifest.h"
#include "recycle/content_hasher.h"

namespace recycle {

using nlohmann::json;

RecordLayout CacheIdentity::layout() const {
  return record_layout.empty() ? layout_from_shapes(record_shapes, codec) : record_layout;
}

json CacheIdentity::record_layout_to_json() const {
  json out = json::array();
  for (const TensorLayout& t : layout()) {
    out.push_back({{"name", t.name},
                   {"dtype", dtype_name(t.dtype)},
                   {"shape", t.shape},
                   {"codec", t.codec_word()}});
  }
  return out;
}

void CacheIdentity::to_json(json* j) const {
  json& o = *j;
  o["format_version"] = format_version;
  o["model"] = model;
  o["fingerprint"] = fingerprint;
  o["split_at"] = split_at;
  o["prefix_blocks"] = prefix_blocks;
  o["total_blocks"] = total_blocks;
  o["keyer"] = keyer;
  o["codec"] = codec_name(codec);
  o["preprocess"] = preprocess;
  if (!prefix_precision.empty()) o["prefix_precision"] = prefix_precision;
  if (!input_shape.empty()) o["input_shape"] = input_shape;
  o["record_layout"] = record_layout_to_json();
  o["record_shapes"] = layout_shapes(layout());
}

namespace {

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

// Sets id->record_layout from j's "record_layout", checked and consistent with record_shapes
// (already read), or, in a manifest from before layouts, derived from record_shapes and codec.
Status read_layout(const json& j, CacheIdentity* id) {
  if (!j.contains("record_layout")) {
    id->record_layout = layout_from_shapes(id->record_shapes, id->codec);
    const Status st = check_layout(id->record_layout);
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
    const std::string codec = t.contains("codec") ? t.at("codec").get<std::string>() : "";
    if (tl.stored_exactly() ? !codec.empty() && codec != kRawCodecName
                            : !parse_codec(codec, &tl.codec)) {
      return Status::corruption(which + ": codec '" + codec + "' does not fit dtype " +
                                dtype_name(tl.dtype) +
                                (tl.stored_exactly() ? " (raw)" : " (fp32, fp16, bf16, int8)"));
    }
    layout.push_back(std::move(tl));
  }
  const Status st = check_layout(layout);
  if (!st.ok()) return Status::corruption("manifest: " + st.message());
  if (layout_shapes(layout) != id->record_shapes) {
    return Status::corruption("manifest: record_shapes disagree with record_layout (" +
                              layout_string(layout) + ")");
  }
  id->record_layout = std::move(layout);
  return Status();
}

}  // namespace

std::string CacheIdentity::prefix_precision_name() const {
  return prefix_precision.empty() ? "fp32" : prefix_precision;
}

Status CacheIdentity::from_json(const json& j, CacheIdentity* out) {
  try {
    CacheIdentity id;
    const int64_t version = json_int(j, "format_version");
    if (version != kCacheFormatVersion) {
      return Status::mismatch("cache format version " + std::to_string(version) +
                              ", this build reads version " + std::to_string(kCacheFormatVersion));
    }
    id.format_version = kCacheFormatVersion;
    id.model = j.at("model").get<std::string>();
    id.fingerprint = j.at("fingerprint").get<std::string>();
    id.split_at = j.at("split_at").get<std::string>();
    id.prefix_blocks = json_int(j, "prefix_blocks");
    id.total_blocks = json_int(j, "total_blocks");
    id.keyer = j.at("keyer").get<std::string>();
    const std::string codec = j.at("codec").get<std::string>();
    if (!parse_codec(codec, &id.codec)) {
      return Status::corruption("manifest: the codec '" + codec +
                                "' is not one this version knows (" + join(codec_names(), ", ") +
                                ")");
    }
    id.preprocess = j.at("preprocess").get<std::string>();
    if (j.contains("prefix_precision")) {
      id.prefix_precision = j.at("prefix_precision").get<std::string>();
      if (id.prefix_precision.empty()) {
        return Status::corruption("manifest: an empty prefix precision");
      }
    }
    if (j.contains("input_shape") && !read_shape(j.at("input_shape"), false, &id.input_shape)) {
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
      id.record_shapes.push_back(dims);
    }
    const Status layout_st = read_layout(j, &id);
    if (!layout_st.ok()) return layout_st;
    if (id.prefix_blocks < 0 || id.total_blocks < 0 || id.prefix_blocks > id.total_blocks) {
      return Status::corruption("manifest has an impossible split point");
    }
    *out = std::move(id);
    return Status();
  } catch (const json::exception& e) {
    return Status::corruption(std::string("manifest is not valid: ") + e.what());
  }
}

namespace {

// A tensor's codec as identity compares and digests it: "=" for a float tensor stored with the
// identity's own codec, so that a codec change is named once, by the codec line; else its word.
std::string compared_codec(const TensorLayout& t, Codec identity_codec) {
  return !t.stored_exactly() && t.codec == identity_codec ? "=" : t.codec_word();
}

using ComparedTensor = std::tuple<std::string, Dtype, std::vector<int64_t>, std::string>;

std::vector<ComparedTensor> layout_identity(const RecordLayout& layout, Codec identity_codec) {
  std::vector<ComparedTensor> out;
  for (const TensorLayout& t : layout) {
    out.emplace_back(t.name, t.dtype, t.shape, compared_codec(t, identity_codec));
  }
  return out;
}

}  // namespace

std::vector<std::string> CacheIdentity::identity_differences(const CacheIdentity& requested) const {
  std::vector<std::string> out;
  auto check = [&](const char* field, const std::string& have, const std::string& want) {
    if (have != want) {
      out.push_back(std::string(field) + ": the cache has " + have + ", this run asks for " + want);
    }
  };
  check("format version", std::to_string(format_version), std::to_string(requested.format_version));
  check("model", model, requested.model);
  check("prefix fingerprint (weights)", fingerprint, requested.fingerprint);
  check("split point",
        split_at + " (" + std::to_string(prefix_blocks) + "/" + std::to_string(total_blocks) +
            " blocks)",
        requested.split_at + " (" + std::to_string(requested.prefix_blocks) + "/" +
            std::to_string(requested.total_blocks) + " blocks)");
  check("keyer", keyer, requested.keyer);
  check("codec", codec_name(codec), codec_name(requested.codec));
  check("preprocessing", preprocess, requested.preprocess);
  check("prefix precision", prefix_precision_name(), requested.prefix_precision_name());
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

std::string CacheIdentity::digest() const {
  ContentHasher hasher;
  hasher.update_u64(static_cast<uint64_t>(format_version));
  const std::string codec_word = codec_name(codec);
  for (const std::string* field :
       {&model, &fingerprint, &split_at, &keyer, &codec_word, &preprocess}) {
    hasher.update_field(*field);
  }
  if (!prefix_precision.empty()) hasher.update_field("prefix_precision=" + prefix_precision);
  hasher.update_u64(static_cast<uint64_t>(prefix_blocks));
  hasher.update_u64(static_cast<uint64_t>(total_blocks));
  auto update_shape = [&](const std::vector<int64_t>& shape) {
    hasher.update_u64(shape.size());
    for (int64_t d : shape) hasher.update_u64(static_cast<uint64_t>(d));
  };
  update_shape(input_shape);
  // The layout as identity_differences compares it: a float tensor in the identity's codec
  // digests "=" for its codec (the digests of levels on disk depend on it).
  const RecordLayout l = layout();
  hasher.update_u64(l.size());
  for (const TensorLayout& t : l) {
    hasher.update_field(t.name);
    hasher.update_field(dtype_name(t.dtype));
    update_shape(t.shape);
    hasher.update_field(compared_codec(t, codec));
  }
  return hasher.digest().to_hex();
}

}  // namespace recycle
