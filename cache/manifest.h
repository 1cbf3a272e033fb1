// Manifest: a cache's identity and contents, stored as JSON inside the cache. A cache whose
// identity does not match the model and options in use is refused, never silently reused.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <map>
#include <string>
#include <vector>

#include "cache/record_layout.h"
#include "cache/status.h"

namespace recycle {

constexpr int kCacheFormatVersion = 1;

struct SplitInfo {
  std::string data;       // the dataset spec the split was built from
  int64_t samples = 0;    // entries in the samples index
  int64_t unique = 0;     // distinct keys among them
  bool complete = false;  // false while a build is writing it (or was killed doing so)
};

struct Manifest {
  // Identity: every field here must match for a cache to be reused.
  int format_version = kCacheFormatVersion;
  std::string model;        // model spec, e.g. "resnet18:width=16,in_channels=1"
  std::string fingerprint;  // XXH3-128 hex of the prefix's parameters and buffers
  std::string split_at;     // name of the last block in the prefix
  int64_t prefix_blocks = 0;
  int64_t total_blocks = 0;
  std::string keyer;        // keyer spec
  std::string codec;        // codec name (what the build's --codec asked for its float tensors)
  std::string preprocess;   // input preprocessing spec
  // Shape of one input sample (e.g. {1, 28, 28}). Empty in caches made before it was stored;
  // such a cache is checked by its record shapes instead.
  std::vector<int64_t> input_shape;
  // What each record holds: per tensor a name, dtype, shape (-1: variable) and codec. Read
  // it through layout(). A manifest stored before layouts were (no "record_layout" in its
  // JSON) gets the layout derived from record_shapes and codec when read, and so does a
  // manifest built in memory with record_shapes alone. Compared as identity in names,
  // dtypes, fixed and variable dimensions and codecs (see identity_differences).
  RecordLayout record_layout;

  // Contents.
  // Per tensor in a record, its shape per sample (-1: variable). Kept beside the layout for
  // the readers that know only it; when record_layout is set it wins: to_json_string writes
  // the layout's shapes here, and from_json_string refuses a manifest where they disagree.
  std::vector<std::vector<int64_t>> record_shapes;
  std::vector<std::string> class_names;             // class_names[label]
  std::string classifier;   // "pretrained" (kept from the weights) or "new" (initialised per run)
  std::map<std::string, SplitInfo> splits;
  int64_t records = 0;      // distinct records stored
  int64_t record_bytes = 0; // bytes of encoded records written (before RocksDB compression)

  // record_layout, or when it is empty the layout derived from record_shapes and codec.
  RecordLayout layout() const;

  double recycle_ratio() const {
    return total_blocks == 0 ? 0.0 : static_cast<double>(prefix_blocks) / total_blocks;
  }

  std::string to_json_string(int indent = 2) const;
  // {"NAME": {"data", "samples", "unique", "complete"}, ...}: the splits as both the manifest
  // and recycle-inspect's --json write them.
  nlohmann::json splits_to_json() const;
  // [{"name", "dtype", "shape", "codec"}, ...]: layout() as both the manifest and
  // recycle-inspect's --json write it.
  nlohmann::json record_layout_to_json() const;
  static Status from_json_string(const std::string& text, Manifest* out);

  // One line per identity field that differs, e.g.
  // "codec: the cache has fp16, this run asks for fp32", or "record layout: the cache has
  // activation float32 64x7x7 fp16, this run asks for activation float32 64x14x14 fp16".
  // A layout's float tensor stored with its manifest's codec counts as "the codec", so a
  // codec change alone gives the codec line only. Empty when the identities match.
  std::vector<std::string> identity_differences(const Manifest& requested) const;
};

// "cache DIR was built for another setup: A; B (HINT)", for the lines
// identity_differences() returned; the hint says what the calling tool offers, e.g.
// "use --rebuild to start over".
std::string mismatch_message(const std::string& dir, const std::vector<std::string>& differences,
                             const std::string& hint);

// shape_string(), "2x7x7", is declared in cache/record_layout.h.

}  // namespace recycle
