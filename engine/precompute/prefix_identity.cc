#include "engine/precompute/prefix_identity.h"

#include "engine/models/fingerprint.h"

namespace recycle {

void set_prefix_identity(const BlockModel& model, const SplitModel& split,
                         CacheIdentity* identity) {
  identity->model = model.spec;
  identity->fingerprint = module_fingerprint(*split.prefix);
  identity->split_at = split.split_at;
  identity->prefix_blocks = split.prefix_blocks;
  identity->total_blocks = split.total_blocks;
}

}  // namespace recycle
