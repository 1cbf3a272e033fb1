// A cache's manifest, as the cache stores it (JSON inside the cache) and read_cache_manifest
// (cache.h) returns it: its identity (CacheIdentity: the fields that decide whether a stored cache
// is the one a run asks for, among them the layout of its records, TensorLayout) and its contents
// (SplitInfo per data split, counts). A cache whose identity differs from the requested one is
// refused (build, train, levels, verify), never silently reused. The identity is compared
// (identity_differences), serialised (to_json / from_json) and digested (digest: the name of a
// cache level's directory) in cache/cache_identity.cc and nowhere else; the record layout's
// checks are in cache/record_layout.h.
//
// Value types: copyable, no invariants beyond what from_json checks. Not thread safe to mutate.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "recycle/formats.h"
#include "recycle/key.h"
#include "recycle/status.h"

namespace recycle {

// ---- the layout of a record -------------------------------------------------------------------

// RecordLayout: what every record of a cache holds, tensor by tensor: a name, a dtype, a shape
// per sample in which -1 marks a variable dimension (a text's sequence length), and for float
// tensors the codec. A record's tensors are matched to it by position, since records store no
// names (cache/record.h).

// A dimension whose size may differ from record to record (any size >= 1).
constexpr int64_t kVariableDim = -1;
// The codec word of a tensor stored exactly (every dtype but float32), as JSON and messages
// write it.
constexpr const char* kRawCodecName = "raw";

struct TensorLayout {
  std::string name;  // e.g. "activation", "lengths", "mask"; unique in a layout
  Dtype dtype = Dtype::kFloat32;
  std::vector<int64_t> shape;  // per sample; each dimension >= 1 or kVariableDim; rank <= 8
  // How a float32 tensor is stored. A tensor of any other dtype is stored exactly ("raw") and
  // its codec is not used.
  Codec codec = Codec::kFp32;

  // "fp16", or "raw" for a tensor stored exactly: the codec as JSON and messages write it.
  std::string codec_word() const { return stored_exactly() ? kRawCodecName : codec_name(codec); }
  bool stored_exactly() const { return dtype != Dtype::kFloat32; }

  friend bool operator==(const TensorLayout& a, const TensorLayout& b) {
    return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape &&
           (a.stored_exactly() || a.codec == b.codec);
  }
  friend bool operator!=(const TensorLayout& a, const TensorLayout& b) { return !(a == b); }
};

// In record order. Empty only in a manifest that has no records yet.
using RecordLayout = std::vector<TensorLayout>;

// ---- the identity ----------------------------------------------------------------------------

constexpr int kCacheFormatVersion = 1;

struct CacheIdentity {
  int format_version = kCacheFormatVersion;
  std::string model;        // model spec, e.g. "resnet18:width=16,in_channels=1"
  std::string fingerprint;  // XXH3-128 hex of the prefix's parameters and buffers
  std::string split_at;     // name of the last block in the prefix
  int64_t prefix_blocks = 0;
  int64_t total_blocks = 0;
  std::string keyer;           // keyer spec
  Codec codec = Codec::kFp32;  // what the build's --codec asked for its float tensors
  std::string preprocess;      // input preprocessing spec
  // The arithmetic the prefix ran in when not fp32: "bf16" or "fp16" (autocast). Empty: fp32,
  // as in every cache made before it was stored.
  std::string prefix_precision;
  // prefix_precision as messages and reports say it: "fp32" when empty. The one place that
  // maps the empty precision to its word.
  std::string prefix_precision_name() const;
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

// ---- the manifest: identity and contents ------------------------------------------------------

// Where a split of a sharded build (recycle-build --sharded) lives: this cache holds shard
// `index` of `count`, the samples whose content key `rule` puts there (cache/shard_rule.h),
// and `split_samples` is the whole split's count (every shard's together). count 0: the cache
// holds the whole split.
struct SplitShard {
  int64_t index = 0;
  int64_t count = 0;
  std::string rule;
  int64_t split_samples = 0;
  bool sharded() const { return count > 0; }
  friend bool operator==(const SplitShard& a, const SplitShard& b) {
    return a.index == b.index && a.count == b.count && a.rule == b.rule &&
           a.split_samples == b.split_samples;
  }
  friend bool operator!=(const SplitShard& a, const SplitShard& b) { return !(a == b); }
};

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
  // The --classes filter the split was built with ("" for every class). Manifests written before
  // it was stored get it from `data` (its " classes=X" part) when read.
  std::string classes;
  // The shard of the split this cache holds (sharded builds only).
  SplitShard shard;

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
  std::vector<std::string> class_names;  // class_names[label]
  // kClassifierPretrained (kept from the weights), kClassifierNew (initialised per run) or
  // kClassifierNone (a program's prefix, whose head is the program's).
  std::string classifier;
  // The absolute path of the weights file the last build read (recycle-build --weights; "" for
  // none): not identity (the fingerprint is), a default for recycle-predict --weights that the
  // fingerprint still checks.
  std::string weights_file;
  // A progressive level (recycle-train --progressive derives it from another cache by running
  // the blocks that froze next on that cache's records): the cache it came from, and the split
  // points its fingerprint chains through, [k0, k1, ..., this level's prefix_blocks] (blocks
  // 0..k0 fingerprinted as recycle-build does, then each next range added; recycle-predict
  // checks the model it is given against that). Empty for any other cache. Not identity.
  std::string derived_from;
  std::vector<int64_t> derived_blocks;
  std::map<std::string, SplitInfo> splits;
  int64_t records = 0;       // distinct records stored
  int64_t record_bytes = 0;  // bytes of encoded records written (before RocksDB compression)

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

}  // namespace recycle
