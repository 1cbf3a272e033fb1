// WritableSplit (writable_split.h): a cache opened to write one split.
#include "cache/writable_split.h"

#include <stdexcept>

#include "cache/cache_dir.h"
#include "cache/damaged_records.h"
#include "cache/shard_rule.h"
#include "recycle/errors.h"

namespace recycle {

WritableSplit::WritableSplit(const Options& o) : dir_(o.dir), split_(o.split) {
  ActivationStore::check_split_name(o.split).throw_if_error();
  if (o.rebuild) ActivationStore::destroy(o.dir).throw_if_error();
  StoreOptions so;
  so.compression = o.compression;
  ActivationStore::open(o.dir, so, &store_).throw_if_error();
  const Status have = store_->read_manifest(&stored_);
  if (have.is_not_found()) return;
  have.throw_if_error();
  is_new_ = false;
}

WritableSplit::~WritableSplit() = default;

void WritableSplit::start(Manifest manifest, const std::string& head) {
  if (writer_) throw std::logic_error("WritableSplit::start: started already");
  manifest_ = std::move(manifest);
  if (is_new_) head_ = head;
  writer_ = std::make_unique<SplitWriter>(store_.get(), &manifest_, split_);
  store_->read_index(split_, &index_).throw_if_error();
  stored_entries_ = static_cast<int64_t>(index_.size());
  had_records_ = false;
  const Status first = store_->for_each_record([&](const Key&, std::string_view) {
    had_records_ = true;
    return false;  // one is enough
  });
  if (first.is_corruption()) {
    had_records_ = true;  // a damaged one
  } else {
    first.throw_if_error();
  }
  find_damaged();
}

void WritableSplit::find_damaged() {
  damaged_.clear();
  // The list of the directory the store opened (a link is followed once, as the store did).
  resolve_cache_path(store_->dir(), &real_dir_).throw_if_error();
  read_damaged_records(real_dir_, &damaged_).throw_if_error();
}

bool WritableSplit::complete_for(const std::string& data, int64_t samples) const {
  const auto it = manifest_.splits.find(split_);
  return it != manifest_.splits.end() && it->second.complete && it->second.data == data &&
         it->second.samples == samples && stored_entries_ == samples;
}

void WritableSplit::begin(const SplitInfo& info) {
  writer_->begin(info, stored_entries_, head_);
  head_.clear();  // written once
  if (damaged_.empty()) return;
  // Deleted, they are missing ones to the plan of any split. Those no longer stored (deleted
  // by a build that then stopped before computing them) count nothing. A record that reads
  // (one that does not parse, or holds values that are not finite) takes its own bytes off the
  // manifest's count; a damaged one's size cannot be read, and the mean record's stands in for
  // it (exact when every record has one size, as in a fixed layout; off by the difference for
  // variable-length ones).
  const int64_t mean = manifest_.records > 0 ? manifest_.record_bytes / manifest_.records : 0;
  StagedWrite w = writer_->stage();
  for (const Key& k : damaged_) {
    std::string bytes;
    const Status st = store_->get_record(k, &bytes);
    if (!st.is_not_found()) w.delete_record(k, st.ok() ? static_cast<int64_t>(bytes.size()) : mean);
  }
  writer_->seal(&w);
  writer_->write(&w);
}

void WritableSplit::finish(const std::unordered_set<Key, KeyHash>& computed) {
  writer_->finish();
  std::unordered_set<Key, KeyHash> done;
  for (const Key& k : computed) {
    if (damaged_.count(k)) done.insert(k);
  }
  forget_damaged_records(real_dir_, done).throw_if_error();
}

void WritableSplit::ingest_records(const std::vector<std::string>& files) {
  store_->ingest_records(files, &manifest_).throw_if_error();
}

void refuse_other_identity(const Manifest& stored, const Manifest& wanted, const std::string& dir,
                           const std::string& hint) {
  const auto diffs = stored.identity().identity_differences(wanted.identity());
  if (!diffs.empty()) throw StaleCacheError(mismatch_message(dir, diffs, hint));
}

void refuse_other_shard(const Manifest& stored, const std::string& split, const SplitShard& want,
                        const std::string& dir, const std::string& hint) {
  const auto entry = stored.splits.find(split);
  if (entry == stored.splits.end()) return;
  const SplitShard& has = entry->second.shard;
  if (has.index == want.index && has.count == want.count && has.rule == want.rule) return;
  throw StaleCacheError(mismatch_message(dir,
                                         {"split " + split + ": the cache has " + shard_words(has) +
                                          ", this run asks for " + shard_words(want)},
                                         hint));
}

}  // namespace recycle
