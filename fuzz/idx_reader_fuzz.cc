// libFuzzer harness for recycle::read_idx_file (engine/data/idx_reader.h).
//
// Every input is written to a scratch file and read with expected_ndim 3 and 1, then gzipped
// and read again. Checked, beyond "no crash, no sanitizer report":
// - only std::runtime_error (message starting with the path) or std::invalid_argument escape;
// - a successful read satisfies the IdxArray invariant (ndim dims >= 1, data.size() == product);
// - for a plain (not gzip) input, success and the array agree with a small reference parser
//   of the documented format;
// - reading the gzipped input gives exactly the same result (array, or error text) as reading
//   the plain input: decompression is transparent.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "engine/data/idx_reader.h"
#include "fuzz/fuzz_util.h"

namespace {

using recycle::fuzz::fail;
using recycle::fuzz::ScratchFile;
using recycle::fuzz::starts_with;

struct Outcome {
  enum Kind { kOk, kRuntimeError, kInvalidArgument } kind = kOk;
  recycle::IdxArray array;
  std::string error;  // runtime_error text without the "PATH: " prefix
};

Outcome read(const std::string& path, int ndim) {
  Outcome o;
  try {
    o.array = recycle::read_idx_file(path, ndim);
  } catch (const std::invalid_argument& e) {
    o.kind = Outcome::kInvalidArgument;
    o.error = e.what();
  } catch (const std::runtime_error& e) {
    o.kind = Outcome::kRuntimeError;
    const std::string msg = e.what();
    FUZZ_CHECK(starts_with(msg, path + ": "), "message does not start with the path: " + msg);
    o.error = msg.substr(path.size() + 2);
  } catch (const std::exception& e) {
    fail(std::string("read_idx_file threw ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    fail("read_idx_file threw a non-std exception");
  }
  if (o.kind == Outcome::kOk) {
    const recycle::IdxArray& a = o.array;
    FUZZ_CHECK(a.dims.size() == static_cast<size_t>(ndim), "wrong number of dims");
    uint64_t total = 1;
    for (int64_t d : a.dims) {
      FUZZ_CHECK(d >= 1 && d <= 0xFFFFFFFFll, "dimension out of range: " + std::to_string(d));
      total *= static_cast<uint64_t>(d);
    }
    FUZZ_CHECK(total == a.data.size(), "data.size() != product(dims)");
  }
  return o;
}

// The documented format, parsed directly: header, ndim big-endian u32 dims (none 0, product at
// most 2^34), then exactly product(dims) bytes. Returns true and fills *out when valid.
bool reference_parse(const uint8_t* d, size_t n, int ndim, recycle::IdxArray* out) {
  if (n < 4 || d[0] != 0 || d[1] != 0 || d[2] != 0x08 || d[3] != ndim) return false;
  const size_t header = 4 + 4 * static_cast<size_t>(ndim);
  if (n < header) return false;
  using u128 = unsigned __int128;
  u128 total = 1;
  out->dims.clear();
  for (int i = 0; i < ndim; ++i) {
    const uint8_t* p = d + 4 + 4 * i;
    const uint64_t dim = (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) |
                         (uint64_t{p[2]} << 8) | uint64_t{p[3]};
    if (dim == 0) return false;
    total *= dim;
    out->dims.push_back(static_cast<int64_t>(dim));
  }
  if (total > (u128{1} << 34)) return false;
  if (n - header != total) return false;
  out->data.assign(d + header, d + n);
  return true;
}

bool same(const Outcome& a, const Outcome& b) {
  if (a.kind != b.kind) return false;
  if (a.kind != Outcome::kOk) return a.error == b.error;
  return a.array.dims == b.array.dims && a.array.data == b.array.data;
}

std::string describe(const Outcome& o) {
  switch (o.kind) {
    case Outcome::kOk: return "ok (" + std::to_string(o.array.data.size()) + " bytes)";
    case Outcome::kRuntimeError: return "runtime_error: " + o.error;
    case Outcome::kInvalidArgument: return "invalid_argument: " + o.error;
  }
  return "?";
}

// gzip-wraps `n` bytes (deflate level 1) in memory.
std::string gzip(const uint8_t* d, size_t n) {
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    fail("deflateInit2 failed");
  }
  std::string out(deflateBound(&zs, n) + 64, '\0');
  zs.next_in = const_cast<Bytef*>(d);
  zs.avail_in = static_cast<uInt>(n);
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) fail("deflate did not finish");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ScratchFile plain("idx");
  static ScratchFile zipped("idxgz");
  const bool input_is_gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;

  plain.write(data, size);
  if (!input_is_gzip) {
    const std::string gz = gzip(data, size);
    zipped.write(gz.data(), gz.size());
  }

  for (int ndim : {3, 1}) {
    const Outcome a = read(plain.path(), ndim);
    if (!input_is_gzip) {
      recycle::IdxArray expected;
      const bool valid = reference_parse(data, size, ndim, &expected);
      FUZZ_CHECK(valid == (a.kind == Outcome::kOk),
                 "reference says " + std::string(valid ? "valid" : "invalid") + ", reader says " +
                     describe(a) + " (ndim " + std::to_string(ndim) + ")");
      if (valid) {
        FUZZ_CHECK(expected.dims == a.array.dims && expected.data == a.array.data,
                   "array differs from the reference");
      }
    }
    // The same bytes behind gzip must read identically (error texts name the other path, and
    // a gzip input inside gzip is not expected to match, so compare only plain inputs).
    if (!input_is_gzip) {
      Outcome b = read(zipped.path(), ndim);
      FUZZ_CHECK(same(a, b), "plain: " + describe(a) + " / gzipped: " + describe(b));
    }
  }
  return 0;
}
