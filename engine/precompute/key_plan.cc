// KeyPlan (key_plan.h): which samples a build writes and which records it computes.
#include "engine/precompute/key_plan.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "keyers/view_key.h"
#include "recycle/manifest.h"  // SplitInfo::record_keys

namespace recycle {

void KeyPlan::set_views(std::string augment, int64_t views) {
  augment_ = std::move(augment);
  views_ = views;
}

std::vector<Key> KeyPlan::record_keys(const Key& key) const {
  SplitInfo info;
  info.augment = augment_;
  info.views = views_;
  return info.record_keys(key);
}

void KeyPlan::set_keys(std::vector<Key> keys) {
  keys_ = std::move(keys);
  keyed_ = true;
}

void KeyPlan::plan(std::vector<IndexEntry> existing, const std::vector<int64_t>& labels,
                   bool stored_complete, bool had_records) {
  existing_ = std::move(existing);
  const int64_t n = static_cast<int64_t>(keys_.size());
  // Positions whose index entry must be written: new, or different from what is stored.
  todo_.clear();
  for (int64_t i = 0; i < n; ++i) {
    const IndexEntry want{keys_[i], labels[i]};
    if (!stored_as(i, want)) todo_.push_back(i);
  }
  unchanged_ = todo_.empty() && static_cast<int64_t>(existing_.size()) == n && stored_complete;
  // Keys known to have a record: everything the stored index points to, but damaged ones.
  present_.clear();
  for (const IndexEntry& e : existing_) {
    for (const Key& k : record_keys(e.key)) {
      if (!damaged_.count(k)) present_.insert(k);
    }
  }
  had_records_ = had_records;
  next_ = 0;
}

bool KeyPlan::stored_as(int64_t pos, const IndexEntry& want) const {
  if (pos >= static_cast<int64_t>(existing_.size()) || !(existing_[pos] == want)) return false;
  if (damaged_.empty()) return true;
  for (const Key& k : record_keys(want.key)) {
    if (damaged_.count(k)) return false;
  }
  return true;
}

void KeyPlan::add_chunk(const std::vector<Key>& keys, const std::vector<int64_t>& labels,
                        size_t* begin, size_t* end) {
  *begin = todo_.size();
  for (size_t i = 0; i < keys.size(); ++i) {
    const int64_t pos = static_cast<int64_t>(keys_.size());
    keys_.push_back(keys[i]);
    if (!stored_as(pos, IndexEntry{keys[i], labels[i]})) todo_.push_back(pos);
  }
  keyed_ = true;
  *end = todo_.size();
  next_ = *end;
}

bool KeyPlan::next_chunk(size_t size, size_t* begin, size_t* end) {
  if (next_ >= todo_.size()) return false;
  *begin = next_;
  *end = std::min(todo_.size(), next_ + size);
  next_ = *end;
  return true;
}

void KeyPlan::find_missing(size_t begin, size_t end, const ActivationStore& store,
                           std::vector<int64_t>* pos, std::vector<Key>* keys,
                           std::vector<int64_t>* view_of) {
  // Distinct keys of this chunk that are not known to be stored yet.
  std::vector<Key> unknown;
  std::vector<int64_t> unknown_pos, unknown_view;
  std::unordered_set<Key, KeyHash> in_chunk;
  for (size_t t = begin; t < end; ++t) {
    const std::vector<Key> record = record_keys(keys_[todo_[t]]);
    for (size_t v = 0; v < record.size(); ++v) {
      if (!present_.count(record[v]) && in_chunk.insert(record[v]).second) {
        unknown.push_back(record[v]);
        unknown_pos.push_back(todo_[t]);
        unknown_view.push_back(static_cast<int64_t>(v));
      }
    }
  }
  // A store that held no record when the run began has only what this run wrote: `present`.
  std::vector<Status> found(unknown.size(), Status::not_found(""));
  if (had_records_) store.multi_get(unknown, [](size_t, std::string_view) {}, &found);
  pos->clear();
  keys->clear();
  view_of->clear();
  for (size_t u = 0; u < unknown.size(); ++u) {
    if (damaged_.count(unknown[u])) {  // computed again
      found[u] = Status::not_found("");
      recomputed_.insert(unknown[u]);
    }
    if (found[u].ok()) {
      present_.insert(unknown[u]);
    } else if (found[u].is_not_found()) {
      present_.insert(unknown[u]);  // computed by the caller
      pos->push_back(unknown_pos[u]);
      keys->push_back(unknown[u]);
      if (views_ > 0) view_of->push_back(unknown_view[u]);
    } else if (found[u].is_corruption()) {
      throw std::runtime_error(
          found[u].to_string() + ": run recycle-inspect --cache " + store.dir() +
          " --verify, which notes every damaged record, then this build again to compute them");
    } else {
      found[u].throw_if_error();
    }
  }
}

int64_t KeyPlan::compute_item(int64_t pos, int64_t view) const {
  return views_ > 0 ? pos * views_ + view : pos;
}

void KeyPlan::from_items(const std::vector<int64_t>& items, std::vector<int64_t>* pos,
                         std::vector<Key>* keys, std::vector<int64_t>* view_of) const {
  pos->clear();
  keys->clear();
  view_of->clear();
  for (int64_t item : items) {
    const int64_t p = views_ > 0 ? item / views_ : item;
    if (p < 0 || p >= static_cast<int64_t>(keys_.size())) {
      throw std::runtime_error("a batch names sample " + std::to_string(p) + " of " +
                               std::to_string(keys_.size()));
    }
    pos->push_back(p);
    if (views_ > 0) {
      view_of->push_back(item % views_);
      keys->push_back(view_key(keys_[p], augment_, item % views_));
    } else {
      keys->push_back(keys_[p]);
    }
  }
}

}  // namespace recycle
