// The digest by which the ranks of a distributed or sharded build agree that they build the same
// data: XXH3-128 over each sample's content key (Key::to_bytes, 16 bytes) and label (int64,
// little-endian), in the split's order. One definition for the engine's ranks (rank_board.h)
// and the Python package's (recycle.build(..., sharded=True), through _native.KeysDigest).
// Not thread safe; no LibTorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "recycle/key.h"

namespace recycle {

class KeysDigest {
 public:
  KeysDigest();
  ~KeysDigest();
  KeysDigest(const KeysDigest&) = delete;
  KeysDigest& operator=(const KeysDigest&) = delete;

  // The next sample: its key and its label.
  void add(const Key& key, int64_t label);
  // The next samples: `keys` their keys' bytes end to end (16 bytes each, as Key::to_bytes),
  // `labels` theirs. Throws std::invalid_argument when the counts differ.
  void add(std::string_view keys, const int64_t* labels, size_t count);
  // The digest of every sample added so far, as 32 hex digits (Key::to_hex's form).
  std::string hex() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace recycle
