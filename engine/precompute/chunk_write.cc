// engine/precompute/chunk_write.h: one planned chunk's staged write.
#include "engine/precompute/chunk_write.h"

#include <stdexcept>

namespace recycle {

StagedWrite stage_chunk(SplitWriter& writer, const KeyPlan& plan, size_t begin, size_t end,
                        const std::vector<Key>& record_keys, std::vector<std::string>* records,
                        const std::function<IndexEntry(int64_t pos)>& entry_at,
                        BuildReport* report) {
  if (record_keys.size() != records->size()) {
    throw std::logic_error("stage_chunk: one key per record");
  }
  StagedWrite w = writer.stage();
  for (size_t r = 0; r < records->size(); ++r) w.put_record(record_keys[r], (*records)[r]);
  records->clear();
  for (size_t t = begin; t < end; ++t) {
    const int64_t pos = plan.todo()[t];
    w.put_index(pos, entry_at(pos));
  }
  writer.seal(&w);
  report->computed += w.records;
  report->bytes += static_cast<int64_t>(w.record_bytes());
  report->index_written += w.entries;
  return w;
}

}  // namespace recycle
