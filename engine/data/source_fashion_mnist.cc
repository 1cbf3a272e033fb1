// fashion-mnist[:DIR]: Debian's IDX .gz files (DIR defaults to kDefaultFashionMnistDir); split
// "train" reads train-*, "test" reads t10k-*. Streamed, the images stay in the IDX file and are
// read through IdxPixels.
#include <stdexcept>

#include "engine/data/data_source.h"
#include "engine/data/idx_reader.h"

namespace recycle {

namespace {

class IdxReader : public PixelReader {
 public:
  IdxReader(const std::string& file, const std::vector<int64_t>& item_shape, int64_t max_row)
      : file_(file, 3) {
    const std::vector<int64_t>& dims = file_.dims();
    if (item_shape.size() != 3 || dims[1] != item_shape[1] || dims[2] != item_shape[2] ||
        max_row >= dims[0]) {
      throw std::runtime_error(file + ": its header changed since the dataset was read");
    }
    item_ = dims[1] * dims[2];
  }

  void read(const int64_t* rows, int64_t n, uint8_t* out) override {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = rows[i];
      if (row < next_row_) throw std::invalid_argument("IdxReader: rows out of order");
      if (row > next_row_) file_.read(nullptr, static_cast<uint64_t>((row - next_row_) * item_));
      file_.read(out + i * item_, static_cast<uint64_t>(item_));
      next_row_ = row + 1;
    }
  }

  void finish() override { file_.finish(); }

 private:
  IdxStream file_;
  int64_t item_ = 0;
  int64_t next_row_ = 0;  // the row the file is at
};

class IdxPixels : public PixelSource {
 public:
  explicit IdxPixels(std::string file) : file_(std::move(file)) {}
  std::string where() const override { return file_; }
  std::unique_ptr<PixelReader> open(const std::vector<int64_t>& item_shape,
                                    int64_t max_row) const override {
    return std::make_unique<IdxReader>(file_, item_shape, max_row);
  }

 private:
  std::string file_;
};

SourceData load(const std::string& path, const DatasetOptions& options, bool stream) {
  const std::string dir = path.empty() ? kDefaultFashionMnistDir : path;
  const std::string& split = options.split;
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    throw std::invalid_argument("fashion-mnist has splits train and test, not '" + split + "'");
  }
  const std::string image_file = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  IdxArray images;
  if (!stream) {
    images = read_idx_file(image_file, 3);
  } else {
    images.dims = IdxStream(image_file, 3).dims();  // the header; the data is streamed
  }
  const IdxArray labels = read_idx_file(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 1);
  if (images.dims[0] != labels.dims[0]) {
    throw std::runtime_error(dir + ": " + std::to_string(images.dims[0]) + " images but " +
                             std::to_string(labels.dims[0]) + " labels");
  }
  SourceData out;
  out.canonical = "fashion-mnist:" + dir;
  Dataset& d = out.data;
  d.class_names = fashion_mnist_class_names();
  d.item_shape = {1, images.dims[1], images.dims[2]};
  d.pixels = std::move(images.data);
  if (stream) out.source = std::make_shared<IdxPixels>(image_file);
  d.labels.resize(labels.data.size());
  d.ids.resize(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= d.class_names.size()) {
      throw std::runtime_error(dir + ": label " + std::to_string(labels.data[i]) + " of sample " +
                               std::to_string(i) + " is not a Fashion-MNIST class (0-9)");
    }
    d.labels[i] = labels.data[i];
    d.ids[i] = split + "/" + std::to_string(i);
  }
  return out;
}

}  // namespace

DataSourceEntry fashion_mnist_source() {
  DataSourceEntry e;
  e.name = "fashion-mnist";
  e.usage = "fashion-mnist[:DIR]";
  e.bare = true;
  e.load = load;
  return e;
}

}  // namespace recycle
