// id keyer: a key from an id the dataset provides (for data whose content is not at hand).
#pragma once

#include "recycle/keyer.h"

namespace recycle {

// Spec: "id". Two samples with the same id share a key, whatever their content: use it only
// when the dataset's ids are stable and unique per content.
class IdKeyer final : public Keyer {
 public:
  std::string spec() const override { return "id"; }
  Key key(const KeyInput& input) const override;
};

}  // namespace recycle
