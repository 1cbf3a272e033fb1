// The damaged-records list: the keys of the records recycle-inspect --verify found damaged (a
// blob or table block that fails its checksum, a record that does not parse or holds values that
// are not finite) or missing (an index entry points to it, the store lacks it), kept in a file of
// the cache's own beside its database, DIR/recycle-damaged-records. The next build of a split
// whose samples have one of them computes it again (WritableSplit deletes the listed records
// still stored when the split's writes begin, KeyPlan computes them as missing ones) and takes
// it off the list when the split is complete; the file goes when the list is empty. verify
// writes the list anew each time it runs.
//
// The file is text: a header line, then one key a line as Key::to_hex writes it. It is the
// cache's, so ActivationStore::check_destroy accepts it and destroy deletes it; a file that is
// not such a list is refused with a line saying what to do.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "recycle/key.h"
#include "recycle/status.h"

namespace recycle {

constexpr const char* kDamagedRecordsName = "recycle-damaged-records";
// Written first, then renamed over the list (a kill leaves the old list or the new one).
constexpr const char* kDamagedRecordsTempName = "recycle-damaged-records.new";

using KeySet = std::unordered_set<Key, KeyHash>;

// The keys on the list of the cache in `dir` (empty when it has none). Corruption for a file
// that is not such a list.
Status read_damaged_records(const std::string& dir, KeySet* keys);
// Replaces the list with `keys` (sorted for reading); removes it when `keys` is empty.
Status write_damaged_records(const std::string& dir, std::vector<Key> keys);
// Takes `done` off the list (a split computed them again, or no longer points to them).
Status forget_damaged_records(const std::string& dir, const KeySet& done);

}  // namespace recycle
