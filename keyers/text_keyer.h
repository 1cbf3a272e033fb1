// text keyer: a key from UTF-8 text, exact bytes by default.
#pragma once

#include "recycle/keyer.h"

namespace recycle {

struct TextKeyerOptions {
  // Collapse runs of ASCII white space to one space and trim both ends before hashing.
  bool normalize_space = false;
  // Lower-case ASCII letters before hashing (non-ASCII bytes are kept as they are).
  bool lower_case = false;
};

// Spec: "text", "text:space", "text:lower" or "text:space,lower".
class TextKeyer final : public Keyer {
 public:
  explicit TextKeyer(TextKeyerOptions options = {}) : options_(options) {}
  std::string spec() const override;
  Key key(const KeyInput& input) const override;
  // The text exactly as it is hashed.
  std::string normalized(std::string_view text) const;

 private:
  TextKeyerOptions options_;
};

}  // namespace recycle
