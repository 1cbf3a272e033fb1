// A trained head's file: what recycle-train --save-head writes and recycle-predict reads. A
// tensor file (engine/models/tensor_file.h: safetensors, read without running anything) of the
// head's parameters and buffers with one metadata entry, "recycle.head": JSON of the identity
// the head was trained against (HeadIdentity). A head is
// only meaningful on the activations of the prefix it was trained behind, so a reader compares
// that identity with the cache it serves from (head_differences) and refuses another one.
// One place writes and reads these files. Not thread safe per object.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "cache/manifest.h"
#include "engine/models/block_model.h"
#include "engine/models/split_model.h"
#include "engine/models/tensor_file.h"

namespace recycle {

struct HeadIdentity {
  // From a cache: the cache's identity (model, prefix fingerprint, split point, keyer, codec,
  // preprocessing, record layout). From raw data (recycle-train --no-cache or --freeze): the
  // prefix's part alone (model, fingerprint, split point, blocks); the rest is empty.
  CacheIdentity identity;
  std::vector<std::string> class_names;  // class_names[label] of the classifier's outputs
  bool from_cache = false;
};

// The JSON a head file stores: {"format", "from_cache", "model", "fingerprint", "split_at",
// "prefix_blocks", "total_blocks", "class_names"} and, from a cache, "cache_identity"
// (CacheIdentity::to_json). A compiled head (recycle.export(..., cache=DIR)) carries the same
// JSON in its package's metadata.
std::string head_identity_json(const HeadIdentity& h);
// A head identity from the JSON a head file stores (`path` names the file in errors). Throws
// std::runtime_error for JSON that is not one.
HeadIdentity head_identity_from_json(const std::string& text, const std::string& path);

// The identity of a head trained from the cache of manifest m.
HeadIdentity head_identity_of_cache(const Manifest& m);
// The identity of a head trained behind `split`'s prefix of `model` (no cache).
HeadIdentity head_identity_of_model(const BlockModel& model, const SplitModel& split);

// Writes `head` and `identity` to `path` atomically (engine/util/atomic_file.h): a reader sees
// the old file or the whole new one; `extra`, when given, adds entries of its own (a
// checkpoint's: checkpoint.h). Throws std::runtime_error "cannot write PATH: why".
void save_head(BlockStack& head, const HeadIdentity& identity, const std::string& path,
               const std::function<void(TensorFile&)>& extra = {});

// One line per field in which the head's identity and the cache's differ ("codec: the cache
// has fp16, the head was trained for int8"). For a head trained from a cache every identity
// field counts (CacheIdentity::identity_differences), for one trained from raw data the
// prefix's fields; the class names always. Empty when the head fits the cache.
std::vector<std::string> head_differences(const HeadIdentity& head, const Manifest& cache);

// A head file, read and checked (a whole tensor file, the identity entry) when constructed.
class HeadFile {
 public:
  // Throws std::runtime_error with one line naming `path` when it cannot be read or is not a
  // head file (no "recycle.head" entry: not written by recycle-train --save-head, or written by
  // a version before heads carried their identity; an older version's archive is refused with
  // how to convert it).
  explicit HeadFile(const std::string& path);
  // The head file whose bytes were read elsewhere (a data-parallel job's checkpoint, read by
  // rank 0 and sent to every rank), `path` naming it in errors; the same checks.
  static HeadFile of_bytes(const std::string& bytes, const std::string& path);
  const HeadIdentity& identity() const { return identity_; }
  // Loads the parameters and buffers into `head`, which must have the trained head's
  // architecture (made from identity().identity.model split at its prefix_blocks). Throws
  // std::runtime_error naming the file when an entry is missing or has another shape.
  void load_into(BlockStack& head);
  // The file's tensors and metadata (for a checkpoint's own).
  const TensorFile& file() const { return file_; }
  const std::string& path() const { return path_; }

 private:
  HeadFile() = default;
  // file_ parsed from `bytes`, and its identity entry read.
  void parse(const std::string& bytes);

  std::string path_;
  HeadIdentity identity_;
  TensorFile file_;
};

}  // namespace recycle
