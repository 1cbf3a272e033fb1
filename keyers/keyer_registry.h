// The keyer registry: spec string -> keyer, through a plain name -> factory map.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "keyers/keyer.h"

namespace recycle {

// Builds the keyer a spec names: "xxh3", "text[:space][,lower]", "id".
// Throws std::invalid_argument naming the spec and the known keyers when it is not understood.
// The result's spec() is the canonical form (e.g. "text:lower,space" -> "text:space,lower").
std::unique_ptr<Keyer> make_keyer(const std::string& spec);

// The registered keyer names, sorted.
std::vector<std::string> keyer_names();

}  // namespace recycle
