// read_cache_manifest and verify_cache of include/recycle/cache.h (cache/verify.cc holds the rest).
#include <memory>

#include "cache/activation_store.h"
#include "cache/open_existing.h"
#include "recycle/cache.h"

namespace recycle {

InspectReport verify_cache(const std::string& dir) { return inspect_cache(dir, /*verify=*/true); }

Manifest read_cache_manifest(const std::string& dir) {
  Manifest m;
  open_cache_for_read(dir, &m);
  return m;
}

}  // namespace recycle
