#include "engine/distributed/sealed_store.h"

#include <c10/util/hash.h>

#include "engine/distributed/dist_options.h"  // random_hex

namespace recycle {

namespace {

constexpr char kMagic[] = "RS1";     // the format of a sealed value
constexpr size_t kIvHex = 32;        // 16 random bytes, as hex
constexpr size_t kTagHex = 40;       // HMAC-SHA1, as hex
constexpr size_t kHeader = 3 + kIvHex + kTagHex;

uint8_t nibble(char c) {
  return static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10);
}

// The token's two keys: one to encrypt with, one to authenticate with.
std::string encryption_key(const std::string& token) {
  return hmac_sha1_hex(token, "recycle store: encryption");
}
std::string mac_key(const std::string& token) {
  return hmac_sha1_hex(token, "recycle store: authentication");
}

// `data` XOR the keystream of (key, iv): HMAC-SHA1(key, iv . counter) blocks of 20 bytes.
void apply_keystream(const std::string& key, const std::string& iv, std::vector<uint8_t>* data) {
  for (size_t at = 0, block = 0; at < data->size(); ++block) {
    const std::string hex = hmac_sha1_hex(key, iv + "/" + std::to_string(block));
    for (size_t i = 0; i < 20 && at < data->size(); ++i, ++at) {
      (*data)[at] ^= static_cast<uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    }
  }
}

std::string tag_of(const std::string& token, const std::string& key, const std::string& iv,
                   const std::vector<uint8_t>& ciphertext) {
  return hmac_sha1_hex(mac_key(token), key + std::string(1, '\0') + iv +
                                           std::string(ciphertext.begin(), ciphertext.end()));
}

}  // namespace

std::string hmac_sha1_hex(const std::string& key_text, const std::string& message) {
  constexpr size_t kBlock = 64;
  std::string key = key_text.size() > kBlock ? c10::sha1(key_text).str() : key_text;
  key.resize(kBlock, '\0');
  std::string inner(kBlock, '\0'), outer(kBlock, '\0');
  for (size_t i = 0; i < kBlock; ++i) {
    inner[i] = static_cast<char>(key[i] ^ 0x36);
    outer[i] = static_cast<char>(key[i] ^ 0x5c);
  }
  return c10::sha1(outer + c10::sha1(inner + message).str()).str();
}

std::vector<uint8_t> seal(const std::string& token, const std::string& key,
                          const std::vector<uint8_t>& value) {
  const std::string iv = random_hex(16);
  std::vector<uint8_t> ciphertext = value;
  apply_keystream(encryption_key(token), iv, &ciphertext);
  const std::string header = kMagic + iv + tag_of(token, key, iv, ciphertext);
  std::vector<uint8_t> out(header.begin(), header.end());
  out.insert(out.end(), ciphertext.begin(), ciphertext.end());
  return out;
}

bool open_sealed(const std::string& token, const std::string& key,
                 const std::vector<uint8_t>& sealed, std::vector<uint8_t>* value) {
  if (sealed.size() < kHeader || std::string(sealed.begin(), sealed.begin() + 3) != kMagic) {
    return false;
  }
  const std::string iv(sealed.begin() + 3, sealed.begin() + 3 + kIvHex);
  const std::string tag(sealed.begin() + 3 + kIvHex, sealed.begin() + kHeader);
  std::vector<uint8_t> data(sealed.begin() + kHeader, sealed.end());
  const std::string want = tag_of(token, key, iv, data);
  unsigned char differ = 0;  // in constant time
  for (size_t i = 0; i < kTagHex; ++i) differ |= static_cast<unsigned char>(tag[i] ^ want[i]);
  if (differ != 0) return false;
  apply_keystream(encryption_key(token), iv, &data);
  *value = std::move(data);
  return true;
}

SealedStore::SealedStore(c10::intrusive_ptr<c10d::Store> inner, std::string token,
                         std::string where, std::vector<std::string> plain)
    : c10d::Store(inner->getTimeout()),
      inner_(std::move(inner)),
      token_(std::move(token)),
      where_(std::move(where)),
      plain_(std::move(plain)) {}

bool SealedStore::is_plain(const std::string& key) const {
  for (const std::string& p : plain_) {
    if (key.rfind(p, 0) == 0) return true;
  }
  return false;
}

void SealedStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  inner_->set(key, is_plain(key) ? value : seal(token_, key, value));
}

std::vector<uint8_t> SealedStore::get(const std::string& key) {
  if (is_plain(key)) return inner_->get(key);
  std::vector<uint8_t> value;
  if (!open_sealed(token_, key, inner_->get(key), &value)) {
    throw ForgedValueError(
        "the value of " + key + " in the job's store at " + where_ + " was not written by a rank "
        "of this job (a process without " + kJobTokenVariable + " reached the store): the job "
        "stops here, and nothing else was done because of it");
  }
  return value;
}

int64_t SealedStore::add(const std::string& key, int64_t value) { return inner_->add(key, value); }
bool SealedStore::deleteKey(const std::string& key) { return inner_->deleteKey(key); }
bool SealedStore::check(const std::vector<std::string>& keys) { return inner_->check(keys); }
int64_t SealedStore::getNumKeys() { return inner_->getNumKeys(); }
void SealedStore::wait(const std::vector<std::string>& keys) { inner_->wait(keys); }
void SealedStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  inner_->wait(keys, timeout);
}
const std::chrono::milliseconds& SealedStore::getTimeout() const noexcept {
  return inner_->getTimeout();
}
void SealedStore::setTimeout(const std::chrono::milliseconds& timeout) {
  inner_->setTimeout(timeout);
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Store> SealedStore::clone() {
  return c10::make_intrusive<SealedStore>(inner_->clone(), token_, where_, plain_);
}
#endif

}  // namespace recycle
