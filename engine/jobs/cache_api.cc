// The functions of include/recycle/cache.h that cache/verify.h does not already hold.
#include <memory>

#include "cache/activation_store.h"
#include "recycle/cache.h"

namespace recycle {

InspectReport verify_cache(const std::string& dir) { return inspect_cache(dir, /*verify=*/true); }

Manifest read_cache_manifest(const std::string& dir) {
  StoreOptions so;
  so.read_only = true;
  std::unique_ptr<ActivationStore> store;
  ActivationStore::open(dir, so, &store).throw_if_error();
  Manifest m;
  store->read_manifest(&m).throw_if_error();
  return m;
}

}  // namespace recycle
