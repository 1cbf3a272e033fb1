// Reader for IDX files of unsigned bytes (the MNIST / Fashion-MNIST format), plain or gzip.
#pragma once

#include <cstdint>
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

}  // namespace recycle
