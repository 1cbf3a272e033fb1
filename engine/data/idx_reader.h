// Reader for IDX files of unsigned bytes (the MNIST / Fashion-MNIST format), plain or gzip.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace recycle {

// An N-dimensional array of bytes in row-major order. Invariant: data.size() == product(dims),
// and every dimension is at least 1.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads an IDX file of unsigned bytes (type code 0x08), gzip-compressed (.gz as Debian's
// dataset-fashion-mnist ships it) or plain; zlib detects which. `expected_ndim` is the number of
// dimensions the caller needs: 3 for images (count x rows x cols), 1 for labels (count).
//
// The file must hold exactly the header (bytes 0, 0, type code 0x08, ndim; then ndim
// big-endian uint32 dimensions) followed by product(dims) bytes of data and nothing else.
// Throws std::invalid_argument when expected_ndim is not in 1..255, and std::runtime_error whose
// message starts with `path` and names the problem: cannot open, gzip error (zlib's text), a
// truncated header, wrong magic, a type code other than 0x08, ndim != expected_ndim, a dimension
// of 0, a total size over 2^34 bytes, short data ("has N bytes of data, header says M"), or
// trailing bytes after the data.
//
// Reads in large chunks; thread-safe (no shared state), the result is owned by the caller.
IdxArray read_idx_file(const std::string& path, int expected_ndim);

// The same file read in pieces, so a reader holds only what it asks for: the constructor
// opens it and checks the header, read() hands out the data in order, finish() checks that
// the data is all there and that nothing follows it. The errors are read_idx_file's, each when
// the reading reaches it (short data: at the read that runs out; trailing bytes: at finish).
// Not thread safe.
class IdxStream {
 public:
  IdxStream(const std::string& path, int expected_ndim);
  ~IdxStream();
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  uint64_t data_bytes() const { return total_; }  // product(dims)
  uint64_t position() const { return position_; }  // data bytes read (or skipped) so far

  // The next n bytes of data into out, or skipped when out is null. Throws when the data ends
  // before them ("has N bytes of data, header says M") or asks past the header's size.
  void read(uint8_t* out, uint64_t n);
  // Skips the rest of the data, then throws on trailing bytes.
  void finish();

 private:
  struct File;
  std::string path_;
  std::unique_ptr<File> file_;
  std::vector<int64_t> dims_;
  uint64_t total_ = 0;
  uint64_t position_ = 0;
};

}  // namespace recycle
