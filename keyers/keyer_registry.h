// The keyer registry: spec string -> keyer, through a plain name -> factory map. Programs may
// register their own keyers (see examples/custom_keyer.cc). Thread safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "keyers/keyer.h"

namespace recycle {

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
