// Manifest: a cache's identity and contents, stored as JSON inside the cache. A cache whose
// identity does not match the model and options in use is refused, never silently reused.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "cache/cache_identity.h"
#include "cache/record_layout.h"
#include "cache/status.h"
#include "keyers/key.h"

namespace recycle {

struct SplitInfo {
  std::string data;       // the dataset spec the split was built from
  int64_t samples = 0;    // entries in the samples index
  int64_t unique = 0;     // distinct keys among them
  bool complete = false;  // false while a build is writing it (or was killed doing so)
  // Augmented views (docs/augmentation.md): a split built with --augment SPEC --views K stores
  // K records per distinct sample, under view_key(key, augment, 0..K-1) (keyers/view_key.h),
  // and none under the key itself. views 0: one record per sample, under its key. Both belong
  // to the split's identity: a rebuild with others is refused.
  std::string augment;  // canonical spec (engine/data/augment.h); "" with views 0
  int64_t views = 0;

  // The keys of the records a sample with content key `key` reads: {key} without views, else
  // its K view keys.
  std::vector<Key> record_keys(const Key& key) const;
};

// Manifest::classifier's words.
inline constexpr char kClassifierPretrained[] = "pretrained";
inline constexpr char kClassifierNew[] = "new";
inline constexpr char kClassifierNone[] = "none";
// The word for a model whose classifier is new (initialised per run) or not.
inline const char* classifier_word(bool is_new) {
  return is_new ? kClassifierNew : kClassifierPretrained;
}

// A cache's identity (the CacheIdentity base: every field of it must match for a cache to be
// reused; compared, serialised and digested in cache/cache_identity.cc) plus its contents. The
// identity's fields are read as the manifest's own (m.model, m.codec, ...); identity() is the
// identity alone.
struct Manifest : CacheIdentity {
  const CacheIdentity& identity() const { return *this; }
  CacheIdentity& identity() { return *this; }

  // Contents.
  std::vector<std::string> class_names;             // class_names[label]
  // kClassifierPretrained (kept from the weights), kClassifierNew (initialised per run) or
  // kClassifierNone (a program's prefix, whose head is the program's).
  std::string classifier;
  // The absolute path of the weights file the last build read (recycle-build --weights; "" for
  // none): not identity (the fingerprint is), a default for recycle-predict --weights that the
  // fingerprint still checks.
  std::string weights_file;
  std::map<std::string, SplitInfo> splits;
  int64_t records = 0;      // distinct records stored
  int64_t record_bytes = 0; // bytes of encoded records written (before RocksDB compression)

  double recycle_ratio() const {
    return total_blocks == 0 ? 0.0 : static_cast<double>(prefix_blocks) / total_blocks;
  }

  std::string to_json_string(int indent = 2) const;
  // {"NAME": {"data", "samples", "unique", "complete"[, "augment", "views"]}, ...}: the splits
  // as both the manifest and recycle-inspect's --json write them (augment and views only for a
  // split with views, so a plain split's JSON is as before).
  nlohmann::json splits_to_json() const;
  static Status from_json_string(const std::string& text, Manifest* out);

  // identity_differences(), layout() and record_layout_to_json() are CacheIdentity's.
};

// "cache DIR was built for another setup: A; B (HINT)", for the lines
// CacheIdentity::identity_differences() returned; the hint says what the calling tool offers, e.g.
// "use --rebuild to start over".
std::string mismatch_message(const std::string& dir, const std::vector<std::string>& differences,
                             const std::string& hint);

// shape_string(), "2x7x7", is declared in cache/record_layout.h.

}  // namespace recycle
