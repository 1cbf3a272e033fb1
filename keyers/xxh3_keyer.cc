#include "keyers/xxh3_keyer.h"

#include <stdexcept>

namespace recycle {

Key Xxh3Keyer::key(const KeyInput& input) const {
  if (input.tensor == nullptr) {
    throw std::invalid_argument("keyer xxh3 needs a tensor input (use --keyer text for text data)");
  }
  ContentHasher hasher;
  hasher.update_tensor(*input.tensor);
  return hasher.digest();
}

}  // namespace recycle
