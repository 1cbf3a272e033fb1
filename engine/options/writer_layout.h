// What WriterOptions::validate (engine/options/writer_validate.cc) builds that CacheWriter
// (engine/jobs/cache_writer.cc) needs too.
#pragma once

#include "cache/record_layout.h"  // RecordLayout

namespace recycle {

struct WriterOptions;

// The record layout WriterOptions' tensors make (float32 ones stored with its codec, the others
// raw), unchecked: WriterOptions::validate checks it.
RecordLayout writer_record_layout(const WriterOptions& o);

}  // namespace recycle
