// ReshardOptions::validate (include/recycle/reshard.h).
#include "base/range_check.h"
#include "recycle/errors.h"
#include "recycle/reshard.h"

namespace recycle {

void ReshardOptions::validate() const {
  if (cache_dir.empty()) throw InvalidArgument("--cache DIR (the shards as they are) is required");
  if (to.empty()) throw InvalidArgument("--to DIR (where the new shards go) is required");
  if (to == cache_dir) {
    throw InvalidArgument("--to must be another path than --cache: the old shards are only read");
  }
  check_range("--shards", shards, int64_t{2}, int64_t{kMaxWorldSize});
  dist.validate();
}

}  // namespace recycle
