// engine/precompute/split_transaction.h: one split's write, for every writer of a cache.
#include "engine/precompute/split_transaction.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "recycle/errors.h"

namespace recycle {

namespace {

// "no views", or "K views of 'SPEC'": how a refused views mismatch names each side.
std::string views_words(int64_t k, const std::string& spec) {
  return k == 0 ? std::string("no views") : std::to_string(k) + " views of '" + spec + "'";
}

// The stored manifest checked against the request, as the writer goes on with it.
Manifest reconciled(Manifest stored, const SplitRequest& r, const StoredChecks& own) {
  const std::string& dir = r.where.dir;
  if (own.before) own.before(stored);
  refuse_other_identity(stored, r.wanted, dir, r.start_over);
  if (own.after) own.after(&stored);
  const auto split = stored.splits.find(r.where.split);
  if (split != stored.splits.end() &&
      (split->second.views != r.views || split->second.augment != r.augment)) {
    throw StaleCacheError(
        mismatch_message(dir,
                         {"split " + r.where.split + ": the cache has " +
                          views_words(split->second.views, split->second.augment) +
                          ", this run asks for " + views_words(r.views, r.augment)},
                         r.elsewhere));
  }
  refuse_other_shard(stored, r.where.split, r.shard, dir, r.elsewhere);
  // Caches made before the input shape was stored get it (their records' shapes matched).
  if (stored.input_shape.empty()) stored.input_shape = r.wanted.input_shape;
  return stored;
}

}  // namespace

SplitTransaction::SplitTransaction(SplitRequest request, const StoredChecks& own_checks,
                                   Clock::time_point start)
    : request_(std::move(request)), start_(start) {
  auto split = std::make_unique<WritableSplit>(request_.where);
  if (const Manifest* stored = split->stored()) {
    split->start(reconciled(*stored, request_, own_checks), "");
  } else {
    split->start(request_.wanted, request_.head ? request_.head() : std::string());
  }
  split_ = std::move(split);
}

void SplitTransaction::begin(SplitInfo info) {
  info.augment = request_.augment;
  info.views = request_.views;
  info.shard = request_.shard;
  split_->begin(info);
}

void SplitTransaction::set_unique(int64_t unique) {
  split_->manifest().splits[request_.where.split].unique = unique;
}

StagedWrite SplitTransaction::stage(const KeyPlan& plan, size_t begin, size_t end,
                                    const std::vector<Key>& record_keys,
                                    std::vector<std::string>* records,
                                    const std::function<IndexEntry(int64_t pos)>& entry_at) {
  if (record_keys.size() != records->size()) {
    throw std::logic_error("SplitTransaction::stage: one key per record");
  }
  SplitWriter& writer = split_->writer();
  // The records' bytes and room for their keys, the index entries and the manifest: the batch
  // is filled without growing (growing copies what it holds, chunks of hundreds of MB).
  size_t reserve = 64 * 1024 + 64 * (records->size() + (end - begin));
  for (const std::string& record : *records) reserve += record.size();
  StagedWrite w = writer.stage(reserve);
  for (size_t r = 0; r < records->size(); ++r) w.put_record(record_keys[r], (*records)[r]);
  records->clear();
  for (size_t t = begin; t < end; ++t) {
    const int64_t pos = plan.todo()[t];
    w.put_index(pos, entry_at(pos));
  }
  writer.seal(&w);
  counters_.computed += w.records;
  counters_.bytes += static_cast<int64_t>(w.record_bytes());
  counters_.index_written += w.entries;
  return w;
}

void SplitTransaction::add_ingested(int64_t computed, int64_t bytes) {
  counters_.computed += computed;
  counters_.bytes += bytes;
}

void SplitTransaction::finish(const std::unordered_set<Key, KeyHash>& computed) {
  split_->finish(computed);
}

BuildReport SplitTransaction::report(BuildReport counts) const {
  counts.computed = counters_.computed;
  counts.bytes = counters_.bytes;
  counts.index_written = counters_.index_written;
  counts.shards = static_cast<int>(request_.shard.count);
  counts.shard_index = static_cast<int>(request_.shard.index);
  return finished_report(std::move(counts), request_.views, split_->manifest().records, start_);
}

BuildReport finished_report(BuildReport r, int64_t views, int64_t cache_records,
                            SplitTransaction::Clock::time_point start) {
  const int64_t per_sample = std::max<int64_t>(1, views);
  r.views = views;
  r.records = r.unique * per_sample;
  r.skipped = r.samples * per_sample - r.computed;
  r.cache_records = cache_records;
  r.seconds = std::chrono::duration<double>(SplitTransaction::Clock::now() - start).count();
  r.samples_per_s = r.seconds > 0 ? r.samples / r.seconds : 0.0;
  return r;
}

}  // namespace recycle
