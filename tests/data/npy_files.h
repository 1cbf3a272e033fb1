// .npy files (format version 1.0) for the npy:DIR tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recycle::testing {

// A .npy file of dtype `descr` ("<f4", "|u1", ...) and `shape`, C order, with `bytes` bytes
// of data from `data` (fewer or more than the shape says, for tests of broken files).
inline std::string npy_bytes(const std::string& descr, const std::vector<int64_t>& shape,
                             const void* data, size_t bytes) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (N,) keeps its comma
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

}  // namespace recycle::testing
