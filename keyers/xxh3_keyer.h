// xxh3 keyer: XXH3-128 over the input tensor's dtype, shape and bytes in row-major order.
#pragma once

#include "recycle/keyer.h"

namespace recycle {

// Spec: "xxh3". Equal content gives an equal key whatever the strides; any change of a byte,
// the shape or the dtype gives another key.
class Xxh3Keyer final : public Keyer {
 public:
  std::string spec() const override { return "xxh3"; }
  Key key(const KeyInput& input) const override;
};

}  // namespace recycle
