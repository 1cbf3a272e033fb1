// SealedStore: the job's c10d store as the ranks of a job started by hand see it (--master
// HOST:PORT with RECYCLE_JOB_TOKEN). Every value is sealed with keys derived from the job token:
// encrypted (XOR with a keystream of HMAC-SHA1 blocks over a fresh random IV and a counter) and
// then authenticated (HMAC-SHA1 over the key, the IV and the ciphertext), so a process that can
// reach the store's port but has no token reads only ciphertext and cannot write a value any rank
// accepts: a value that fails its check ends the job with one line (ForgedValueError) that names
// the key and changes nothing else. What the store itself counts (add: joins, barriers, failure
// counters) cannot be sealed; an outsider can disturb a count, which stops the job at worst.
// LibTorch 1.13's TCPStore listens on every interface (2.x's takes a socket bound to --master):
// this is what keeps its values from anyone else there.
//
// Thread safety: as the wrapped store's (c10d stores are used from several threads).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace recycle {

class ForgedValueError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// HMAC-SHA1 of `message` under `key`, as 40 hex digits (c10::sha1).
std::string hmac_sha1_hex(const std::string& key, const std::string& message);

// The sealed bytes of `value` stored under `key`, and back: open_sealed returns false (leaving
// *value alone) for bytes that were not sealed under this token and key.
std::vector<uint8_t> seal(const std::string& token, const std::string& key,
                          const std::vector<uint8_t>& value);
bool open_sealed(const std::string& token, const std::string& key,
                 const std::vector<uint8_t>& sealed, std::vector<uint8_t>* value);

class SealedStore : public c10d::Store {
 public:
  // `where` names the store in errors (the --master address). Keys that start with one of
  // `plain` are stored as they are: what the ranks show each other before they know they share
  // the token (a nonce, keyed digests), which reveals nothing of it.
  SealedStore(c10::intrusive_ptr<c10d::Store> inner, std::string token, std::string where,
              std::vector<std::string> plain = {});

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  // Throws ForgedValueError for a value that was not sealed under the job token.
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  const std::chrono::milliseconds& getTimeout() const noexcept override;
  void setTimeout(const std::chrono::milliseconds& timeout) override;
#if TORCH_VERSION_MAJOR >= 2
  c10::intrusive_ptr<c10d::Store> clone() override;
#endif

 private:
  c10::intrusive_ptr<c10d::Store> inner_;
  std::string token_;
  std::string where_;
  std::vector<std::string> plain_;
  bool is_plain(const std::string& key) const;
};

}  // namespace recycle
