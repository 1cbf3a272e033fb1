// npy:DIR: split S reads DIR/S_x.npy (uint8 or float32, N x C x H x W, or N x H x W as one
// channel; C order, little-endian) and DIR/S_y.npy (N integer labels >= 0, any integer dtype;
// the classes are 0..max, named by their number). uint8 pixels go the IDX path's way (keyed as
// stored, normalised like Fashion-MNIST); float32 ones are inputs made elsewhere, keyed as
// float32 and given to the prefix as they are. The pixels are streamed from the file.
// S_x.npy of int64 or int32, N x L, holds token ids (a tokenizer's input_ids) and needs
// DIR/S_mask.npy, their attention mask (N x L, right padding): both are read whole and given
// to a pt2 text prefix (Dataset::token_ids).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "engine/data/data_source.h"
#include "recycle/writer.h"  // class_id_problem

namespace recycle {

namespace {

struct NpyHeader {
  std::string descr;           // e.g. "<f4", "|u1"
  std::vector<int64_t> shape;
  uint64_t data_offset = 0;    // bytes before the data
  uint64_t file_size = 0;
};

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

// The value text of 'key' in the header's dict, up to the next top-level ',' or '}'.
std::string dict_value(const std::string& dict, const std::string& key, const std::string& path) {
  const size_t k = dict.find("'" + key + "'");
  if (k == std::string::npos) bad(path, "npy header without '" + key + "'");
  size_t p = dict.find(':', k);
  if (p == std::string::npos) bad(path, "malformed npy header");
  ++p;
  int depth = 0;
  size_t e = p;
  for (; e < dict.size(); ++e) {
    const char c = dict[e];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string v = dict.substr(p, e - p);
  const size_t a = v.find_first_not_of(" "), b = v.find_last_not_of(" ");
  return a == std::string::npos ? "" : v.substr(a, b - a + 1);
}

NpyHeader read_npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, std::string("cannot read: ") + std::strerror(errno));
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    bad(path, "is not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(magic[6]);
  uint64_t len = 0;
  if (major == 1) {
    unsigned char l[2];
    if (!in.read(reinterpret_cast<char*>(l), 2)) bad(path, "truncated npy header");
    len = l[0] | (l[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char l[4];
    if (!in.read(reinterpret_cast<char*>(l), 4)) bad(path, "truncated npy header");
    len = l[0] | (l[1] << 8) | (l[2] << 16) | (static_cast<uint64_t>(l[3]) << 24);
  } else {
    bad(path, "npy format version " + std::to_string(major) + " is not known");
  }
  if (len > (1u << 20)) bad(path, "npy header of " + std::to_string(len) + " bytes");
  std::string dict(len, '\0');
  if (!in.read(dict.data(), static_cast<std::streamsize>(len))) bad(path, "truncated npy header");
  NpyHeader h;
  h.data_offset = (major == 1 ? 10 : 12) + len;
  std::string descr = dict_value(dict, "descr", path);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"')) {
    bad(path, "npy descr " + descr + " is not a simple dtype");
  }
  h.descr = descr.substr(1, descr.size() - 2);
  if (dict_value(dict, "fortran_order", path) != "False") {
    bad(path, "is in Fortran order (save it C-contiguous: np.ascontiguousarray)");
  }
  const std::string shape = dict_value(dict, "shape", path);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    bad(path, "malformed npy shape " + shape);
  }
  size_t p = 1;
  while (p < shape.size() - 1) {
    while (p < shape.size() - 1 && (shape[p] == ' ' || shape[p] == ',')) ++p;
    if (p >= shape.size() - 1) break;
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(shape.substr(p), &used);
    } catch (const std::exception&) {
      bad(path, "malformed npy shape " + shape);
    }
    if (v < 0) bad(path, "malformed npy shape " + shape);
    h.shape.push_back(v);
    p += used;
  }
  std::error_code ec;
  h.file_size = std::filesystem::file_size(path, ec);
  if (ec) bad(path, "cannot read: " + ec.message());
  return h;
}

int64_t element_size(const std::string& descr) {
  if (descr.size() < 3) return 0;
  return std::atoi(descr.c_str() + 2);
}

// Checks that the file holds exactly the data its header says.
void check_size(const std::string& path, const NpyHeader& h, int64_t item) {
  uint64_t want = static_cast<uint64_t>(item);
  for (int64_t d : h.shape) {
    // Checked: a shape whose byte count passes 2^63 would wrap and could seem to fit the file.
    if (__builtin_mul_overflow(want, static_cast<uint64_t>(d), &want) ||
        want > (uint64_t{1} << 62)) {
      std::string dims;
      for (int64_t e : h.shape) dims += (dims.empty() ? "" : " x ") + std::to_string(e);
      bad(path, "npy shape " + dims + " is larger than any file (its byte count overflows)");
    }
  }
  if (h.file_size != h.data_offset + want) {
    bad(path, "has " + std::to_string(h.file_size - std::min(h.file_size, h.data_offset)) +
                  " bytes of data, header says " + std::to_string(want));
  }
}

class NpyReader : public PixelReader {
 public:
  NpyReader(std::string path, uint64_t offset, int64_t item, bool floats)
      : path_(std::move(path)), offset_(offset), item_(item), floats_(floats) {
    fd_ = ::open(path_.c_str(), O_RDONLY);
    if (fd_ < 0) bad(path_, std::string("cannot read: ") + std::strerror(errno));
  }
  ~NpyReader() override { ::close(fd_); }

  void read(const int64_t* rows, int64_t n, uint8_t* out) override {
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* dst = out + i * item_;
      uint64_t at = offset_ + static_cast<uint64_t>(rows[i]) * item_;
      int64_t left = item_;
      while (left > 0) {
        const ssize_t got = ::pread(fd_, dst, static_cast<size_t>(left), static_cast<off_t>(at));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          bad(path_, got < 0 ? std::string("read error: ") + std::strerror(errno) : "ends early");
        }
        dst += got;
        at += static_cast<uint64_t>(got);
        left -= got;
      }
      if (floats_) check_finite(rows[i], out + i * item_);
    }
  }

 private:
  // A NaN or an infinity would be keyed as it is and give the prefix's output for it (or a 0 in
  // its place, by some kernels) a record: refused, naming the sample.
  void check_finite(int64_t row, const uint8_t* bytes) const {
    for (int64_t k = 0; k < item_; k += 4) {
      uint32_t bits;
      std::memcpy(&bits, bytes + k, 4);  // little-endian float32 (checked with the header)
      if (((bits >> 23) & 0xffu) == 0xffu) {
        bad(path_, "sample " + std::to_string(row) + " holds " +
                       ((bits & 0x7fffffu) ? "NaN" : "an infinity") + " at value " +
                       std::to_string(k / 4) + " (non-finite inputs are refused)");
      }
    }
  }

  std::string path_;
  uint64_t offset_;
  int64_t item_;
  bool floats_;
  int fd_ = -1;
};

class NpyPixels : public PixelSource {
 public:
  NpyPixels(std::string path, uint64_t offset, int64_t rows, int64_t item, bool floats)
      : path_(std::move(path)), offset_(offset), rows_(rows), item_(item), floats_(floats) {}
  std::string where() const override { return path_; }
  std::unique_ptr<PixelReader> open(const std::vector<int64_t>&, int64_t max_row) const override {
    if (max_row >= rows_) bad(path_, "its header changed since the dataset was read");
    return std::make_unique<NpyReader>(path_, offset_, item_, floats_);
  }

 private:
  std::string path_;
  uint64_t offset_;
  int64_t rows_, item_;
  bool floats_;  // float32 values (checked finite as they are read)
};

// Whether descr is a little-endian (or one-byte) integer dtype of 1, 2, 4 or 8 bytes, or bool.
bool is_integer_dtype(const std::string& t) {
  if (t == "|b1") return true;
  return t.size() == 3 && (t[0] == '<' || t[0] == '|' || t[0] == '=') &&
         (t[1] == 'i' || t[1] == 'u') && (t[2] == '1' || t[2] == '2' || t[2] == '4' || t[2] == '8');
}

// Every value of an integer (or bool) .npy file whose header is h, as int64, in C order.
std::vector<int64_t> read_integers(const std::string& path, const NpyHeader& h) {
  const std::string& t = h.descr;
  const int64_t size = element_size(t);
  check_size(path, h, size);
  uint64_t count = 1;
  for (int64_t d : h.shape) count *= static_cast<uint64_t>(d);
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(h.data_offset));
  std::string bytes(static_cast<size_t>(count * size), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) bad(path, "ends early");
  std::vector<int64_t> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data()) + i * size;
    uint64_t u = 0;
    for (int64_t b = size; b-- > 0;) u = (u << 8) | p[b];  // little-endian
    int64_t v = static_cast<int64_t>(u);
    if (t[1] == 'i' && size < 8 && (u >> (size * 8 - 1)) & 1) {
      v = static_cast<int64_t>(u) - (int64_t{1} << (size * 8));
    }
    values[i] = v;
  }
  return values;
}

// The labels of y.npy as int64.
std::vector<int64_t> read_labels(const std::string& path) {
  const NpyHeader h = read_npy_header(path);
  if (!is_integer_dtype(h.descr) || h.descr == "|b1") {
    bad(path, "labels of dtype " + h.descr + " (expected integers)");
  }
  if (h.shape.size() != 1) bad(path, "labels must be one-dimensional (N,)");
  std::vector<int64_t> labels = read_integers(path, h);
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string problem = class_id_problem(labels[i], static_cast<int64_t>(i));
    if (!problem.empty()) bad(path, problem);
  }
  return labels;
}

// x.npy of integer token ids [N, L] and mask.npy, the tokenizer's attention mask of the same
// shape: d's item_shape {2, L} and pixels, per sample L ids then L mask values as int64. Ids
// must be >= 0, each mask row 1s then 0s (right padding) with at least one 1.
void load_token_ids(const std::string& x, const NpyHeader& h, const std::string& mask_path,
                    Dataset* d) {
  if (h.shape.size() != 2) {
    bad(x, "integer token ids must be N x L (a tokenizer's input_ids), not " +
               std::to_string(h.shape.size()) + "-D");
  }
  std::error_code ec;
  if (!std::filesystem::exists(mask_path, ec)) {
    bad(x, "holds token ids; their attention mask " + mask_path +
               " is missing (save the tokenizer's attention_mask there, N x L)");
  }
  const NpyHeader mh = read_npy_header(mask_path);
  if (!is_integer_dtype(mh.descr)) {
    bad(mask_path, "mask of dtype " + mh.descr + " (expected integers)");
  }
  if (mh.shape != h.shape) bad(mask_path, "mask's shape differs from " + x + "'s");
  const std::vector<int64_t> ids = read_integers(x, h);
  const std::vector<int64_t> mask = read_integers(mask_path, mh);
  const int64_t n = h.shape[0], length = h.shape[1];
  d->token_ids = true;
  d->item_shape = {2, length};
  d->pixels.resize(static_cast<size_t>(n * 2 * length * 8));
  auto* out = reinterpret_cast<int64_t*>(d->pixels.data());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t* row = ids.data() + i * length;
    const int64_t* m = mask.data() + i * length;
    for (int64_t j = 0; j < length; ++j) {
      if (row[j] < 0) {
        bad(x, "sample " + std::to_string(i) + " holds token id " + std::to_string(row[j]));
      }
      const bool after_padding = j > 0 && m[j - 1] == 0 && m[j] != 0;
      if ((m[j] != 0 && m[j] != 1) || after_padding || (j == 0 && m[j] != 1)) {
        bad(mask_path, "sample " + std::to_string(i) + "'s mask is not 1s then 0s (right padding " +
                           "with at least one token: tokenize with padding_side=\"right\")");
      }
    }
    std::copy_n(row, length, out + i * 2 * length);
    std::copy_n(m, length, out + i * 2 * length + length);
  }
}

// y.npy's labels for the n samples of x, their classes (0..max, named by number) and ids.
void read_labels_of(const std::string& dir, const std::string& split, const std::string& x,
                    const std::string& y, int64_t n, Dataset* d) {
  d->labels = read_labels(y);
  if (static_cast<int64_t>(d->labels.size()) != n) {
    throw std::runtime_error(dir + ": " + std::to_string(n) + " samples in " + x + " but " +
                             std::to_string(d->labels.size()) + " labels in " + y);
  }
  int64_t classes = 0;
  for (int64_t l : d->labels) classes = std::max(classes, l + 1);
  for (int64_t c = 0; c < classes; ++c) d->class_names.push_back(std::to_string(c));
  d->ids.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) d->ids[i] = split + "/" + std::to_string(i);
}

SourceData load(const std::string& dir, const DatasetOptions& options, bool stream) {
  const std::string& split = options.split;
  if (split.empty() || split.find('/') != std::string::npos || split == "." || split == "..") {
    throw std::invalid_argument("npy:" + dir + ": split '" + split + "' cannot name a file");
  }
  const std::filesystem::path folder(dir);
  const std::string x = (folder / (split + "_x.npy")).string();
  const std::string y = (folder / (split + "_y.npy")).string();
  const NpyHeader h = read_npy_header(x);
  const bool is_float = h.descr == "<f4";
  const bool is_tokens = h.descr == "<i8" || h.descr == "<i4";
  if (!is_float && !is_tokens && h.descr != "|u1" && h.descr != "<u1") {
    bad(x, "dtype " + h.descr + " (expected uint8 or float32 inputs, or int64 or int32 token " +
               "ids; little-endian)");
  }
  for (int64_t d : h.shape) {
    if (d < 1) bad(x, "has a dimension of 0");
  }
  SourceData out;
  out.canonical = "npy:" + dir;
  Dataset& d = out.data;
  if (is_tokens) {  // held whole: ids and masks are small beside the records they make
    load_token_ids(x, h, (folder / (split + "_mask.npy")).string(), &d);
    read_labels_of(dir, split, x, y, h.shape[0], &d);
    return out;
  }
  if (h.shape.size() != 4 && h.shape.size() != 3) {
    bad(x, "must be N x C x H x W (or N x H x W), not " + std::to_string(h.shape.size()) + "-D");
  }
  d.float_pixels = is_float;
  d.item_shape = h.shape.size() == 4 ? std::vector<int64_t>{h.shape[1], h.shape[2], h.shape[3]}
                                     : std::vector<int64_t>{1, h.shape[1], h.shape[2]};
  check_size(x, h, is_float ? 4 : 1);  // first: it names the file when the shape overflows
  const int64_t n = h.shape[0];
  read_labels_of(dir, split, x, y, n, &d);
  out.source = std::make_shared<NpyPixels>(x, h.data_offset, n, d.item_bytes(), is_float);
  (void)stream;  // loaded whole, load_dataset reads every row through the source
  return out;
}

}  // namespace

DataSourceEntry npy_source() {
  DataSourceEntry e;
  e.name = "npy";
  e.usage = "npy:DIR";
  e.load = load;
  return e;
}

}  // namespace recycle
