// WritableSplit (writable_split.h): a cache opened to write one split.
#include "cache/writable_split.h"

#include <stdexcept>

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
  store_
      ->for_each_record([&](const Key&, std::string_view) {
        had_records_ = true;
        return false;  // one is enough
      })
      .throw_if_error();
}

bool WritableSplit::complete_for(const std::string& data, int64_t samples) const {
  const auto it = manifest_.splits.find(split_);
  return it != manifest_.splits.end() && it->second.complete && it->second.data == data &&
         it->second.samples == samples && stored_entries_ == samples;
}

void WritableSplit::begin(const SplitInfo& info) {
  ActivationStore::Batch first(*store_);
  if (!head_.empty()) first.put_blob("head", head_);
  writer_->begin(info, stored_entries_, &first);
  head_.clear();  // written once
}

void WritableSplit::ingest_records(const std::vector<std::string>& files) {
  store_->ingest_records(files, &manifest_).throw_if_error();
}

void refuse_other_identity(const Manifest& stored, const Manifest& wanted, const std::string& dir,
                           const std::string& hint) {
  const auto diffs = stored.identity().identity_differences(wanted.identity());
  if (!diffs.empty()) throw StaleCacheError(mismatch_message(dir, diffs, hint));
}

}  // namespace recycle
