// Keyer: turns one sample's input into its cache key. Equal content gives an equal key; any
// other content gives another key (128 bits, so collisions are negligible).
// A keyer's spec() is stored in the cache manifest and compared when the cache is reopened.
#pragma once

#include <string>
#include <string_view>

#include "keyers/content_hasher.h"
#include "keyers/key.h"

namespace recycle {

// What a dataset offers a keyer for one sample. A keyer reads the part it needs and throws
// std::invalid_argument when that part is missing.
struct KeyInput {
  const TensorView* tensor = nullptr;  // the raw input array (images)
  std::string_view text;               // UTF-8 text (text datasets)
  std::string_view id;                 // a stable id the dataset provides
  bool has_text = false;
  bool has_id = false;
};

// Thread safety: key() is const and safe to call from many threads at once.
class Keyer {
 public:
  virtual ~Keyer() = default;
  // The canonical spec string; make_keyer(spec()) builds an equal keyer.
  virtual std::string spec() const = 0;
  virtual Key key(const KeyInput& input) const = 0;
};

}  // namespace recycle
