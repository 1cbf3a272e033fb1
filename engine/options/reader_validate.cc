// ReaderOptions::validate and LoaderOptions::validate (include/recycle/reader.h): what needs no
// file. Compiled into the jobs/ room (recycle_jobs), beside the readers that start with them
// (engine/jobs/cache_reader.cc).
#include "base/range_check.h"
#include "cache/activation_store.h"  // check_split_name
#include "recycle/errors.h"
#include "recycle/reader.h"

namespace recycle {

void ReaderOptions::validate() const {
  ActivationStore::check_split_name(split).throw_if_error();
  if (cache_dir.empty()) throw InvalidArgument("a cache directory is required");
  check_at_least("block_cache_mb", block_cache_mb, int64_t{1});
}

void LoaderOptions::validate() const {
  reader.validate();
  check_at_least("batch_size", batch_size, int64_t{1});
  check_at_least("prefetch", prefetch, int64_t{0});  // 0: read on the calling thread
  check_at_least("world_size", world_size, 1);
  check_range("rank", rank, 0, world_size - 1);
  check_at_least("epoch_samples", epoch_samples, int64_t{0});
  if (epoch_samples > 0 && world_size != 1) {
    throw InvalidArgument(
        "epoch_samples is a rank's own shard's (world_size 1), not a share of a "
        "split of " +
        std::to_string(world_size) + " ranks");
  }
  usable_device_name(device, "device");
}

}  // namespace recycle
