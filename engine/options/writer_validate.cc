// WriterOptions::validate (include/recycle/writer.h). Compiled into the jobs/ room
// (recycle_jobs): its checks are those CacheWriter starts with, made while cache_writer.cc's
// parse_options parses the codec, the compression, the keyer and the layout
// (engine/jobs/option_checks.h); here they run without keeping what they parsed.
#include "engine/jobs/option_checks.h"
#include "recycle/writer.h"

namespace recycle {

void WriterOptions::validate() const { check_writer_options(*this); }

}  // namespace recycle
