#include "recycle/keys_digest.h"

#include <xxhash.h>

#include <stdexcept>

#include "base/coding.h"  // put_le64

namespace recycle {

struct KeysDigest::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

KeysDigest::KeysDigest() : state_(std::make_unique<State>()) {
  if (state_->xxh == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(state_->xxh);
}

KeysDigest::~KeysDigest() = default;

void KeysDigest::add(const Key& key, int64_t label) {
  std::string bytes = key.to_bytes();
  put_le64(&bytes, static_cast<uint64_t>(label));
  XXH3_128bits_update(state_->xxh, bytes.data(), bytes.size());
}

void KeysDigest::add(std::string_view keys, const int64_t* labels, size_t count) {
  if (keys.size() != count * Key::kBytes) {
    throw std::invalid_argument("KeysDigest: " + std::to_string(keys.size()) +
                                " bytes of keys for " + std::to_string(count) + " labels");
  }
  std::string bytes;
  bytes.reserve(count * (Key::kBytes + 8));
  for (size_t i = 0; i < count; ++i) {
    bytes.append(keys.substr(i * Key::kBytes, Key::kBytes));
    put_le64(&bytes, static_cast<uint64_t>(labels[i]));
  }
  XXH3_128bits_update(state_->xxh, bytes.data(), bytes.size());
}

std::string KeysDigest::hex() const {
  const XXH128_hash_t h = XXH3_128bits_digest(state_->xxh);
  return Key{h.high64, h.low64}.to_hex();
}

}  // namespace recycle
