#include "keyers/id_keyer.h"

#include <stdexcept>

namespace recycle {

namespace {
constexpr uint64_t kIdSeed = 0x6964;  // "id"
}  // namespace

Key IdKeyer::key(const KeyInput& input) const {
  if (!input.has_id) throw std::invalid_argument("keyer id needs the dataset to provide ids");
  return hash128(input.id, kIdSeed);
}

}  // namespace recycle
