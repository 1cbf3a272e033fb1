// DatasetOptions::validate (include/recycle/options.h): what needs no file. Compiled into the
// data/ room (recycle_data), whose load_dataset calls it and whose registry of sources it asks.
#include <string>

#include "base/range_check.h"
#include "engine/data/data_source.h"
#include "recycle/errors.h"
#include "recycle/options.h"

namespace recycle {

void DatasetOptions::validate() const {
  if (!parse_data_spec(spec)) {
    throw InvalidArgument("unknown data '" + spec + "' (expected " + data_source_usages() + ")");
  }
  check_at_least("--limit", limit, int64_t{0});  // 0: all
  // A shard is no flag (the progressive launcher sets it).
  check_at_least("slice_count", slice_count, 1);
  check_range("slice_index", slice_index, 0, slice_count - 1);
}

}  // namespace recycle
