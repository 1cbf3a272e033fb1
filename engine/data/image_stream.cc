#include "engine/data/image_stream.h"

#include <stdexcept>
#include <string>

namespace recycle {

ImageStream::ImageStream(const Dataset& data, const StreamedImages& images)
    : data_(data), images_(images), file_(images.file, 3) {
  const std::vector<int64_t>& dims = file_.dims();
  if (images.rows.size() != data.size() || data.item_shape.size() != 3 ||
      dims[1] != data.item_shape[1] || dims[2] != data.item_shape[2] ||
      (!images.rows.empty() && images.rows.back() >= dims[0])) {
    throw std::runtime_error(images.file + ": its header changed since the dataset was read");
  }
}

void ImageStream::read(const int64_t* positions, int64_t n, uint8_t* out) {
  const int64_t item = data_.item_bytes();
  const int64_t size = static_cast<int64_t>(data_.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = positions[i];
    if (p < next_position_ || p >= size) {
      throw std::invalid_argument("ImageStream: sample " + std::to_string(p) +
                                  " is out of order or out of range");
    }
    const int64_t row = images_.rows[p];
    if (row > next_row_) file_.read(nullptr, static_cast<uint64_t>((row - next_row_) * item));
    file_.read(out + i * item, static_cast<uint64_t>(item));
    next_row_ = row + 1;
    next_position_ = p + 1;
  }
}

void ImageStream::finish() {
  file_.finish();
  next_position_ = static_cast<int64_t>(data_.size());
}

}  // namespace recycle
