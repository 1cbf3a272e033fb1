// CacheIdentity: the fields that decide whether a stored cache is the one a run asks for. A
// cache whose identity differs from the requested one is refused (build, train, levels,
// verify), never silently reused. One type, compared (identity_differences), serialised
// (to_json / from_json: the identity fields of the manifest's JSON) and digested (digest: the
// name of a cache level's directory) here and nowhere else. Manifest (cache/manifest.h) is a
// CacheIdentity plus the cache's contents.
//
// A value type: copyable, no invariants beyond what from_json checks. Not thread safe to mutate.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "cache/record_layout.h"
#include "cache/status.h"

namespace recycle {

constexpr int kCacheFormatVersion = 1;

struct CacheIdentity {
  int format_version = kCacheFormatVersion;
  std::string model;        // model spec, e.g. "resnet18:width=16,in_channels=1"
  std::string fingerprint;  // XXH3-128 hex of the prefix's parameters and buffers
  std::string split_at;     // name of the last block in the prefix
  int64_t prefix_blocks = 0;
  int64_t total_blocks = 0;
  std::string keyer;       // keyer spec
  std::string codec;       // codec name (what the build's --codec asked for its float tensors)
  std::string preprocess;  // input preprocessing spec
  // The arithmetic the prefix ran in when not fp32: "bf16" or "fp16" (autocast). Empty: fp32,
  // as in every cache made before it was stored.
  std::string prefix_precision;
  // Shape of one input sample (e.g. {1, 28, 28}). Empty in caches made before it was stored;
  // such a cache is checked by its record shapes instead.
  std::vector<int64_t> input_shape;
  // What each record holds: per tensor a name, dtype, shape (-1: variable) and codec. Read
  // it through layout(). A manifest stored before layouts were (no "record_layout" in its
  // JSON) gets the layout derived from record_shapes and codec when read, and so does an
  // identity built in memory with record_shapes alone. Compared as identity in names,
  // dtypes, fixed and variable dimensions and codecs (see identity_differences).
  RecordLayout record_layout;
  // Per tensor in a record, its shape per sample (-1: variable): the layout's older form, kept
  // for the readers that know only it. When record_layout is set it wins: to_json writes the
  // layout's shapes here, and from_json refuses JSON where they disagree.
  std::vector<std::vector<int64_t>> record_shapes;

  // record_layout, or when it is empty the layout derived from record_shapes and codec.
  RecordLayout layout() const;
  // [{"name", "dtype", "shape", "codec"}, ...]: layout() as both the manifest and
  // recycle-inspect's --json write it.
  nlohmann::json record_layout_to_json() const;

  // One line per identity field that differs, e.g.
  // "codec: the cache has fp16, this run asks for fp32", or "record layout: the cache has
  // activation float32 64x7x7 fp16, this run asks for activation float32 64x14x14 fp16".
  // A layout's float tensor stored with its identity's codec counts as "the codec", so a
  // codec change alone gives the codec line only. The input shape is compared only when both
  // sides know it. Empty when the identities match.
  std::vector<std::string> identity_differences(const CacheIdentity& requested) const;

  // 32 hex digits of XXH3-128 over every identity field, the input shape and layout() (as
  // identity_differences compares it) included; prefix_precision only when set, so an fp32
  // identity keeps the digest it had before the field existed. Equal identities give equal
  // digests.
  std::string digest() const;

  // Writes the identity's fields into the JSON object *j: "format_version", "model",
  // "fingerprint", "split_at", "prefix_blocks", "total_blocks", "keyer", "codec",
  // "preprocess", "prefix_precision" and "input_shape" (when set), "record_layout" and
  // "record_shapes" (both from layout()).
  void to_json(nlohmann::json* j) const;
  // Reads those fields from the JSON object j. A manifest without "record_layout" gets the
  // layout from record_shapes and codec. Mismatch for another format version, Corruption for
  // a missing or malformed field or an impossible split point; never throws.
  static Status from_json(const nlohmann::json& j, CacheIdentity* out);
};

}  // namespace recycle
