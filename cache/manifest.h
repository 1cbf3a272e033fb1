// Manifest: a cache's identity and contents, stored as JSON inside the cache. A cache whose
// identity does not match the model and options in use is refused, never silently reused.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <map>
#include <string>
#include <vector>

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
  std::string codec;        // codec name
  std::string preprocess;   // input preprocessing spec
  // Shape of one input sample (e.g. {1, 28, 28}). Empty in caches made before it was stored;
  // such a cache is checked by its record shapes instead.
  std::vector<int64_t> input_shape;

  // Contents.
  std::vector<std::vector<int64_t>> record_shapes;  // per sample, per tensor in a record
  std::vector<std::string> class_names;             // class_names[label]
  std::string classifier;   // "pretrained" (kept from the weights) or "new" (initialised per run)
  std::map<std::string, SplitInfo> splits;
  int64_t records = 0;      // distinct records stored
  int64_t record_bytes = 0; // bytes of encoded records written (before RocksDB compression)

  double recycle_ratio() const {
    return total_blocks == 0 ? 0.0 : static_cast<double>(prefix_blocks) / total_blocks;
  }

  std::string to_json_string(int indent = 2) const;
  // {"NAME": {"data", "samples", "unique", "complete"}, ...}: the splits as both the manifest
  // and recycle-inspect's --json write them.
  nlohmann::json splits_to_json() const;
  static Status from_json_string(const std::string& text, Manifest* out);

  // One line per identity field that differs, e.g.
  // "codec: the cache has fp16, this run asks for fp32". Empty when the identities match.
  std::vector<std::string> identity_differences(const Manifest& requested) const;
};

// "cache DIR was built for another setup: A; B (HINT)", for the lines
// identity_differences() returned; the hint says what the calling tool offers, e.g.
// "use --rebuild to start over".
std::string mismatch_message(const std::string& dir, const std::vector<std::string>& differences,
                             const std::string& hint);

// "2x7x7": a shape for messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace recycle
