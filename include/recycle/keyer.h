// Keyers: what identifies a sample in a cache (its 128-bit Key, recycle/key.h), and how to add
// one. A Keyer turns one sample's input (KeyInput: its pixels as a TensorView, its text, its id)
// into its key: equal content gives an equal key, any other content another key (128 bits, so
// collisions are negligible). ContentHasher (recycle/content_hasher.h) hashes tensors and bytes.
// register_keyer(name, factory) makes "name[:options]" a keyer spec that BuildOptions::keyer
// (options.h) and make_keyer accept; a keyer's spec() is stored in the cache's identity and
// compared when the cache is reopened. examples/custom_keyer.cc defines and registers one.
// Implemented in keyers/.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "recycle/content_hasher.h"
#include "recycle/key.h"

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

// The registry: spec string -> keyer, through a plain name -> factory map. Thread safe.

// Builds the keyer a spec names: "xxh3", "text[:space][,lower]", "id".
// Throws std::invalid_argument naming the spec and the known keyers when it is not understood.
// The result's spec() is the canonical form (e.g. "text:lower,space" -> "text:space,lower").
std::unique_ptr<Keyer> make_keyer(const std::string& spec);

// Makes a keyer from the options after "NAME:" in a spec ("" when there are none). Throws
// std::invalid_argument for options it does not take. The keyer's spec() must return the
// canonical spec, so that a cache built with it is recognised when reopened.
using KeyerFactory = std::function<std::unique_ptr<Keyer>(const std::string& options)>;

// Adds a keyer under `name` (no ':' or ','). Throws std::invalid_argument when the name is
// taken or malformed.
void register_keyer(const std::string& name, KeyerFactory factory);

// The keyer a build uses when none is named: "text" for text data, "xxh3" otherwise.
std::string default_keyer_spec(bool text_data);

// The registered keyer names, sorted.
std::vector<std::string> keyer_names();

}  // namespace recycle
