// The damaged-records list (damaged_records.h).
#include "cache/damaged_records.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cache/key_hex.h"

namespace recycle {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHeader = "recycle damaged records 1";
// 32 hex digits and a newline a key: a list of this size names 2.9 million records.
constexpr uintmax_t kMaxBytes = 96u << 20;

Status not_a_list(const fs::path& path, const std::string& why) {
  return Status::corruption(path.string() + " is not a list of damaged records (" + why +
                            "); delete it and run recycle-inspect --verify again to make it anew");
}

}  // namespace

Status read_damaged_records(const std::string& dir, KeySet* keys) {
  keys->clear();
  const fs::path path = fs::path(dir) / kDamagedRecordsName;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (!fs::exists(st)) return Status();
  // Only a plain file of the cache's own is read: never a link out of it, a FIFO or a device.
  if (!fs::is_regular_file(st)) return not_a_list(path, "not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return Status::io_error("cannot read " + path.string() + ": " + ec.message());
  if (size > kMaxBytes) return not_a_list(path, "larger than any such list");
  std::ifstream in(path, std::ios::binary);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return Status::io_error("cannot read " + path.string());
  }
  if (line != kHeader) return not_a_list(path, "its first line is not \"" + std::string(kHeader) + "\"");
  for (int64_t number = 2; std::getline(in, line); ++number) {
    Key key;
    if (!key_from_hex(line, &key)) {
      return not_a_list(path, "line " + std::to_string(number) + " is not a record's key");
    }
    keys->insert(key);
  }
  if (in.bad()) return Status::io_error("cannot read " + path.string());
  return Status();
}

Status write_damaged_records(const std::string& dir, std::vector<Key> keys) {
  const fs::path path = fs::path(dir) / kDamagedRecordsName;
  std::error_code ec;
  if (keys.empty()) {
    fs::remove(path, ec);
    if (ec) return Status::io_error("cannot remove " + path.string() + ": " + ec.message());
    return Status();
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::ostringstream text;
  text << kHeader << "\n";
  for (const Key& k : keys) text << k.to_hex() << "\n";
  const fs::path temp = fs::path(dir) / kDamagedRecordsTempName;
  fs::remove(temp, ec);  // a link or a leftover of a killed verify: never written through
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text.str();
    out.flush();
    if (!out) {
      out.close();
      fs::remove(temp, ec);
      return Status::io_error("cannot write " + temp.string());
    }
  }
  fs::rename(temp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(temp, ec);
    return Status::io_error("cannot write " + path.string() + ": " + why);
  }
  return Status();
}

Status forget_damaged_records(const std::string& dir, const KeySet& done) {
  if (done.empty()) return Status();
  KeySet listed;
  Status st = read_damaged_records(dir, &listed);
  if (!st.ok()) return st;
  std::vector<Key> left;
  for (const Key& k : listed) {
    if (!done.count(k)) left.push_back(k);
  }
  if (left.size() == listed.size()) return Status();
  return write_damaged_records(dir, std::move(left));
}

}  // namespace recycle
