#include "cache/record_file_writer.h"

#include <rocksdb/sst_file_writer.h>

#include <filesystem>

#include "cache/store_rocksdb.h"

namespace recycle {

using store_rocksdb::compression_of;
using store_rocksdb::family_options;
using store_rocksdb::from_rocks;

struct RecordFileWriter::Rep {
  rocksdb::Options options;
  std::unique_ptr<rocksdb::SstFileWriter> writer;
  std::string last_key;
};

Status RecordFileWriter::open(const std::string& path, const StoreOptions& options,
                              std::unique_ptr<RecordFileWriter>* out) {
  const rocksdb::CompressionType compression = compression_of(options.compression);
  std::unique_ptr<RecordFileWriter> w(new RecordFileWriter());
  w->rep_ = std::make_unique<Rep>();
  w->path_ = path;
  // The records family's table options, without a block cache (the file is written once).
  w->rep_->options = rocksdb::Options(rocksdb::DBOptions(),
                                      family_options(/*records=*/true, compression, nullptr));
  w->rep_->writer =
      std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(), w->rep_->options);
  const rocksdb::Status s = w->rep_->writer->Open(path);
  if (!s.ok()) return from_rocks(s, "cannot create record file " + path);
  *out = std::move(w);
  return Status();
}

RecordFileWriter::~RecordFileWriter() {
  if (rep_ && !finished_) {
    rep_->writer.reset();  // closes the file
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
}

Status RecordFileWriter::add(const Key& key, std::string_view record) {
  if (finished_) return Status::invalid_argument("record file " + path_ + " is finished");
  std::string k = key.to_bytes();
  if (records_ > 0 && !(rep_->last_key < k)) {
    return Status::invalid_argument("record file " + path_ + ": key " + key.to_hex() +
                                    " is not above the previous one");
  }
  const rocksdb::Status s = rep_->writer->Put(k, rocksdb::Slice(record.data(), record.size()));
  if (!s.ok()) return from_rocks(s, "writing record file " + path_);
  rep_->last_key = std::move(k);
  ++records_;
  record_bytes_ += static_cast<int64_t>(record.size());
  return Status();
}

Status RecordFileWriter::finish() {
  if (finished_) return Status();
  if (records_ == 0) return Status::invalid_argument("record file " + path_ + " has no records");
  const rocksdb::Status s = rep_->writer->Finish();
  if (!s.ok()) return from_rocks(s, "finishing record file " + path_);
  finished_ = true;
  return Status();
}

}  // namespace recycle
