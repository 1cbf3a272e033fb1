// read_cache_manifest, verify_cache and check_rebuild of include/recycle/cache.h (cache/verify.cc
// holds the rest).
#include <memory>

#include "cache/activation_store.h"
#include "cache/open_existing.h"
#include "recycle/cache.h"
#include "recycle/errors.h"

namespace recycle {

InspectReport verify_cache(const std::string& dir) { return inspect_cache(dir, /*verify=*/true); }

Manifest read_cache_manifest(const std::string& dir) {
  Manifest m;
  open_cache_for_read(dir, &m);
  return m;
}

void check_rebuild(const std::string& dir) {
  const Status st = ActivationStore::check_destroy(dir);
  if (!st.ok()) throw InvalidArgument(st.message());
}

}  // namespace recycle
