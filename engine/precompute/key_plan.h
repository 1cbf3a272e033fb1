// KeyPlan: which samples of a split a build writes and which records it computes. It holds the
// samples' keys, the split's index as stored and the record keys known to be stored, and serves
// the chunk loop: the positions whose index entry must be written (todo), chunk by chunk, and per
// chunk the distinct record keys (a sample's key, or its K view keys) that have no stored record.
// SplitBuild (build_stages.h) owns one; the single-process loop, a distributed build's rank 0
// (plan_batches) and the library's CacheWriter (engine/jobs/cache_writer.cc: add_chunk) read it. No
// LibTorch; not thread safe (the build's thread calls it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cache/activation_store.h"  // IndexEntry, ActivationStore::multi_get
#include "recycle/key.h"

namespace recycle {

class KeyPlan {
 public:
  // The records of a sample: its own key (views 0), or its `views` view keys of augmentation
  // `augment` (keyers/view_key.h; SplitInfo::record_keys). Set before anything else.
  void set_views(std::string augment, int64_t views);
  int64_t views() const { return views_; }
  std::vector<Key> record_keys(const Key& key) const;

  // ---- the samples' keys --------------------------------------------------------------------
  void set_keys(std::vector<Key> keys);
  bool keyed() const { return keyed_; }
  const std::vector<Key>& keys() const { return keys_; }  // keys()[i]: sample i's key

  // ---- the plan -----------------------------------------------------------------------------
  // Damaged records (WritableSplit::damaged): computed again although the index points to them;
  // the positions whose records they are join todo. Set before plan.
  void set_damaged(std::unordered_set<Key, KeyHash> damaged) { damaged_ = std::move(damaged); }
  // The damaged records find_missing has listed to compute so far.
  const std::unordered_set<Key, KeyHash>& recomputed() const { return recomputed_; }
  // Against the split's index as stored (`existing`): todo is every position whose entry
  // (keys()[i], labels[i]) is missing or differs, ascending; the split is unchanged when there
  // is none, the index has exactly the samples and `stored_complete` (its manifest entry is
  // complete, for the same data); the records the index points to count as stored.
  // `had_records`: the store held a record when the run began (when not, find_missing asks it
  // nothing: it holds only what this run wrote). Rewinds the chunk loop.
  void plan(std::vector<IndexEntry> existing, const std::vector<int64_t>& labels,
            bool stored_complete, bool had_records);
  // A split fed chunk by chunk (CacheWriter): plan with no keys first, then each chunk's keys
  // and labels appended here; the chunk's positions whose entry is missing or differs join
  // todo, as todo()[*begin, *end) (for find_missing). The chunk loop is the caller's.
  void add_chunk(const std::vector<Key>& keys, const std::vector<int64_t>& labels, size_t* begin,
                 size_t* end);
  const std::vector<IndexEntry>& existing() const { return existing_; }
  const std::vector<int64_t>& todo() const { return todo_; }
  bool unchanged() const { return unchanged_; }
  bool had_records() const { return had_records_; }

  // ---- the chunk loop -----------------------------------------------------------------------
  // The next at most `size` positions of todo, as todo()[*begin, *end); false when none is left.
  bool next_chunk(size_t size, size_t* begin, size_t* end);
  size_t next() const { return next_; }  // todo()[next()] starts the next chunk
  void rewind() { next_ = 0; }

  // ---- the records to compute ---------------------------------------------------------------
  // The distinct record keys of the samples todo()[begin, end) that are not stored, in order,
  // into *keys, with each one's sample position (*pos) and, with views, its view (*view_of):
  // those known to be stored are skipped, and the store is asked about the rest (one MultiGet)
  // when it held records. Keys it has are remembered as stored, and so are the keys listed:
  // the caller computes them, so later chunks do not list them again.
  void find_missing(size_t begin, size_t end, const ActivationStore& store,
                    std::vector<int64_t>* pos, std::vector<Key>* keys,
                    std::vector<int64_t>* view_of);
  // A record to compute as one number (a distributed build's batches): the position, or with
  // views position * views + view; and back, as find_missing gives them.
  int64_t compute_item(int64_t pos, int64_t view) const;
  void from_items(const std::vector<int64_t>& items, std::vector<int64_t>* pos,
                  std::vector<Key>* keys, std::vector<int64_t>* view_of) const;

 private:
  // The index entry stored at `pos` is `want`, and none of its records is damaged.
  bool stored_as(int64_t pos, const IndexEntry& want) const;

  std::string augment_;
  int64_t views_ = 0;
  std::vector<Key> keys_;
  bool keyed_ = false;
  std::vector<IndexEntry> existing_;
  std::vector<int64_t> todo_;
  std::unordered_set<Key, KeyHash> present_;  // keys known to have a stored record
  std::unordered_set<Key, KeyHash> damaged_;  // stored, damaged: computed again
  std::unordered_set<Key, KeyHash> recomputed_;  // those of damaged_ listed to compute
  bool had_records_ = true;
  bool unchanged_ = false;
  size_t next_ = 0;
};

}  // namespace recycle
