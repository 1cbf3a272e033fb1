#include "engine/precompute/prefix_identity.h"

#include "engine/models/fingerprint.h"

#include <stdexcept>

namespace recycle {

void set_prefix_identity(const BlockModel& model, const SplitModel& split,
                         CacheIdentity* identity) {
  identity->model = model.spec;
  identity->fingerprint = module_fingerprint(*split.prefix);
  identity->split_at = split.split_at;
  identity->prefix_blocks = split.prefix_blocks;
  identity->total_blocks = split.total_blocks;
}

void set_prefix_precision(Precision precision, CacheIdentity* identity) {
  identity->prefix_precision = precision == Precision::kFp32 ? "" : precision_name(precision);
}

Precision prefix_precision_of(const CacheIdentity& identity, const std::string& cache_dir) {
  for (const std::string& name : precision_names()) {
    if (name == identity.prefix_precision_name()) return parse_precision(name);
  }
  throw std::runtime_error("cache " + cache_dir + " was built with a prefix precision ('" +
                           identity.prefix_precision + "') this version does not know");
}

}  // namespace recycle
