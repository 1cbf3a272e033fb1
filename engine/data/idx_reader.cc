#include "engine/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/coding.h"
#include "engine/data/regular_file.h"

namespace recycle {
namespace {

// Largest data section accepted: 16 GiB is far beyond any dataset this engine reads, and
// refusing it early keeps a corrupt header from triggering a huge allocation.
constexpr uint64_t kMaxDataBytes = uint64_t{1} << 34;
// Bytes requested per gzread call (gzread takes an unsigned int length).
constexpr size_t kChunkBytes = size_t{1} << 24;
// Size of zlib's internal input buffer; the 8 KiB default makes reads syscall-bound.
constexpr unsigned kGzBufferBytes = 1u << 18;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

[[noreturn]] void fail(const std::string& path, const std::string& reason) {
  throw std::runtime_error(path + ": " + reason);
}

// Throws when zlib reports an error on `file`. zlib prefixes its messages with the path it was
// given; that prefix is dropped since our message already starts with the path.
void check_gz(gzFile file, const std::string& path) {
  int errnum = Z_OK;
  const char* msg = gzerror(file, &errnum);
  if (errnum == Z_OK) return;
  std::string text = msg != nullptr ? msg : "unknown error";
  const std::string prefix = path + ": ";
  if (text.compare(0, prefix.size(), prefix) == 0) text.erase(0, prefix.size());
  fail(path, "gzip error: " + text);
}

// Reads up to `n` bytes into `buf`, stopping early only at end of input. Returns the number of
// bytes read. Throws on any zlib error, including a truncated gzip stream.
size_t read_fully(gzFile file, const std::string& path, uint8_t* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const unsigned want = static_cast<unsigned>(std::min(kChunkBytes, n - got));
    const int r = gzread(file, buf + got, want);
    check_gz(file, path);  // Also catches a truncated stream, which gzread reports as 0.
    if (r < 0) fail(path, "gzip error: read failed");
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

std::string hex_byte(unsigned v) {
  static const char kDigits[] = "0123456789ABCDEF";
  return std::string("0x") + kDigits[(v >> 4) & 0xF] + kDigits[v & 0xF];
}

}  // namespace

struct IdxStream::File {
  GzHandle gz;
};

IdxStream::IdxStream(const std::string& path, int expected_ndim)
    : path_(path), file_(std::make_unique<File>()) {
  if (expected_ndim < 1 || expected_ndim > 255) {
    throw std::invalid_argument("read_idx_file: expected_ndim must be in 1..255, got " +
                                std::to_string(expected_ndim));
  }
  require_regular_file(path);
  errno = 0;
  file_->gz.reset(gzopen(path.c_str(), "rb"));
  gzFile file = file_->gz.get();
  if (!file) {
    fail(path, std::string("cannot open: ") +
                   (errno != 0 ? std::strerror(errno) : "out of memory"));
  }
  gzbuffer(file, kGzBufferBytes);

  uint8_t magic[4];
  if (read_fully(file, path, magic, 4) != 4) {
    fail(path, "too short for an IDX header (need 4 magic bytes)");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    fail(path, "wrong magic: not an IDX file (first two bytes are " + hex_byte(magic[0]) + " " +
                   hex_byte(magic[1]) + ", must be 0x00 0x00)");
  }
  if (magic[2] != 0x08) {
    fail(path, "wrong magic: type code " + hex_byte(magic[2]) +
                   ", only unsigned bytes (0x08) are supported");
  }
  const int ndim = magic[3];
  if (ndim != expected_ndim) {
    fail(path, "has " + std::to_string(ndim) + " dimensions, expected " +
                   std::to_string(expected_ndim));
  }

  std::vector<uint8_t> header(static_cast<size_t>(ndim) * 4);
  if (read_fully(file, path, header.data(), header.size()) != header.size()) {
    fail(path, "truncated header: " + std::to_string(ndim) + " dimensions need " +
                   std::to_string(header.size()) + " bytes");
  }
  dims_.reserve(ndim);
  uint64_t total = 1;
  for (int i = 0; i < ndim; ++i) {
    const uint64_t dim = get_be32(header.data() + 4 * i);
    if (dim == 0) fail(path, "dimension " + std::to_string(i) + " is 0");
    if (dim > kMaxDataBytes / total) {
      fail(path, "dimensions too large: data would exceed 2^34 bytes");
    }
    total *= dim;
    dims_.push_back(static_cast<int64_t>(dim));
  }
  total_ = total;
}

IdxStream::~IdxStream() = default;

void IdxStream::read(uint8_t* out, uint64_t n) {
  if (n > total_ - position_) {
    throw std::invalid_argument(path_ + ": read of " + std::to_string(n) + " bytes at " +
                                std::to_string(position_) + " of " + std::to_string(total_));
  }
  std::vector<uint8_t> scratch;
  if (out == nullptr) scratch.resize(static_cast<size_t>(std::min<uint64_t>(n, 1 << 16)));
  uint64_t done = 0;
  while (done < n) {
    const size_t want = static_cast<size_t>(
        out != nullptr ? n - done : std::min<uint64_t>(n - done, scratch.size()));
    uint8_t* dst = out != nullptr ? out + done : scratch.data();
    const size_t r = read_fully(file_->gz.get(), path_, dst, want);
    done += r;
    position_ += r;
    if (r < want) {
      fail(path_, "has " + std::to_string(position_) + " bytes of data, header says " +
                      std::to_string(total_));
    }
  }
}

void IdxStream::finish() {
  read(nullptr, total_ - position_);
  // Anything after the data is an error; count it in chunks to report how much there is.
  std::vector<uint8_t> scratch(1 << 16);
  uint64_t trailing = 0;
  for (;;) {
    const size_t r = read_fully(file_->gz.get(), path_, scratch.data(), scratch.size());
    trailing += r;
    if (r < scratch.size()) break;
  }
  if (trailing != 0) {
    fail(path_, "has " + std::to_string(trailing) + " trailing bytes after the " +
                    std::to_string(total_) + " bytes of data");
  }
}

IdxArray read_idx_file(const std::string& path, int expected_ndim) {
  IdxStream stream(path, expected_ndim);
  IdxArray out;
  out.dims = stream.dims();
  // Grow the buffer as data arrives (at most 64 MiB ahead), so that a header claiming
  // gigabytes over a short file fails on the missing data, not by allocating them.
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  const uint64_t total = stream.data_bytes();
  while (stream.position() < total) {
    const size_t got = static_cast<size_t>(stream.position());
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, total - got));
    out.data.resize(got + want);
    stream.read(out.data.data() + got, want);
  }
  stream.finish();
  return out;
}

}  // namespace recycle
