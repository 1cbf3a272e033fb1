#include "engine/precompute/prefix_identity.h"

#include "engine/models/fingerprint.h"

namespace recycle {

void set_prefix_identity(const BlockModel& model, const SplitModel& split, Manifest* manifest) {
  manifest->model = model.spec;
  manifest->fingerprint = module_fingerprint(*split.prefix);
  manifest->split_at = split.split_at;
  manifest->prefix_blocks = split.prefix_blocks;
  manifest->total_blocks = split.total_blocks;
}

}  // namespace recycle
