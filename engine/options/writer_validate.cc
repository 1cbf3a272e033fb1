// WriterOptions::validate (include/recycle/writer.h) and the parses of the names its typed fields
// have at the edges (the Python package). Compiled into the jobs/ room (recycle_jobs): it makes
// the keyer to check its spec. CacheWriter (engine/jobs/cache_writer.cc) starts with validate()
// and builds its record layout with writer_record_layout (engine/options/writer_layout.h).
#include <cmath>
#include <stdexcept>
#include <string>

#include "base/range_check.h"
#include "base/strings.h"
#include "cache/activation_store.h"
#include "cache/record.h"
#include "cache/record_layout.h"
#include "cache/shard_rule.h"
#include "engine/options/writer_layout.h"
#include "recycle/errors.h"
#include "recycle/keyer.h"
#include "recycle/manifest.h"  // kVariableDim
#include "recycle/options.h"
#include "recycle/writer.h"

namespace recycle {

Codec parse_writer_codec(std::string_view name) { return parse_codec(name); }

Compression parse_writer_compression(std::string_view name) {
  try {
    return parse_compression(name);
  } catch (const std::invalid_argument&) {
    throw InvalidArgument("unknown compression '" + std::string(name) +
                          "' (known: " + join(compression_names(), ", ") + ")");
  }
}

Dtype parse_writer_dtype(const std::string& tensor, std::string_view dtype) {
  Dtype d;
  if (!parse_dtype(dtype, &d)) {
    throw InvalidArgument("tensor '" + tensor + "' has dtype '" + std::string(dtype) +
                          "'; records hold float32, int64, int32, uint8 or bool");
  }
  return d;
}

RecordLayout writer_record_layout(const WriterOptions& o) {
  RecordLayout layout;
  for (const WriterTensor& t : o.layout) {
    TensorLayout l;
    l.name = t.name;
    l.dtype = t.dtype;
    l.shape = t.shape;
    l.codec = o.codec;  // used by float32 tensors only
    layout.push_back(std::move(l));
  }
  return layout;
}

void WriterOptions::validate() const {
  if (cache_dir.empty()) throw InvalidArgument("a cache directory is required");
  if (samples < 1) throw InvalidArgument("a split needs at least one sample");
  check_shard(shard, kMaxWorldSize);
  if (shard.sharded() && shard.split_samples < samples) {
    throw InvalidArgument("the split's " + std::to_string(shard.split_samples) +
                          " samples cannot hold a shard of " + std::to_string(samples));
  }
  if (model.empty()) throw InvalidArgument("the model that computes the records must be named");
  if (!std::isfinite(flush_seconds) || flush_seconds < 0) {
    throw InvalidArgument("flush_seconds must be a number of seconds, 0 or more, not " +
                          std::to_string(flush_seconds));
  }
  ActivationStore::check_split_name(split).throw_if_error();
  try {
    (void)make_keyer(keyer);
  } catch (const std::invalid_argument& e) {
    throw InvalidArgument(e.what());
  }
  if (layout.empty()) throw InvalidArgument("a record needs at least one tensor");
  for (const WriterTensor& t : layout) {
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (t.shape[i] < 1 && !(i == 0 && t.shape[i] == kVariableDim)) {
        throw InvalidArgument("tensor '" + t.name + "' has shape " + shape_string(t.shape) +
                              " per sample: every dimension must be at least 1 (the first may "
                              "be -1: variable)");
      }
    }
  }
  const Status layout_ok = check_layout(writer_record_layout(*this));
  if (!layout_ok.ok()) throw InvalidArgument(layout_ok.message());
  if (!engine_model.empty() || !engine_weights.empty()) {
    if (class_names.empty()) {
      throw InvalidArgument("an engine model needs the class names (its classifier's outputs)");
    }
    if (engine_split_at.empty()) {
      throw InvalidArgument("an engine model needs the name of the prefix's last block");
    }
  }
}

}  // namespace recycle
