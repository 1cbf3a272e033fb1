#include "engine/data/image_stream.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace recycle {

ImageStream::ImageStream(const Dataset& data, const StreamedImages& images)
    : data_(data), images_(images) {
  if (!images.streamed()) throw std::invalid_argument("ImageStream: the dataset is not streamed");
  if (images.rows.size() != data.size() || data.item_shape.size() != 3) {
    throw std::runtime_error(images.file + ": its header changed since the dataset was read");
  }
  reader_ = images.source->open(data.item_shape, images.rows.empty() ? -1 : images.rows.back());
}

void ImageStream::read(const int64_t* positions, int64_t n, uint8_t* out) {
  const int64_t size = static_cast<int64_t>(data_.size());
  rows_.resize(static_cast<size_t>(n));
  int64_t next = next_position_;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = positions[i];
    if (p < next || p >= size) {
      throw std::invalid_argument("ImageStream: sample " + std::to_string(p) +
                                  " is out of order or out of range");
    }
    rows_[i] = images_.rows[p];
    next = p + 1;
  }
  reader_->read(rows_.data(), n, out);
  next_position_ = next;
}

void ImageStream::finish() {
  reader_->finish();
  next_position_ = static_cast<int64_t>(data_.size());
}

std::vector<std::pair<int64_t, std::string>> ImageStream::skipped() const {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const SkippedRow& r : reader_->skipped()) {
    const auto at = std::lower_bound(images_.rows.begin(), images_.rows.end(), r.row);
    if (at != images_.rows.end() && *at == r.row) {
      out.emplace_back(at - images_.rows.begin(), r.what);
    }
  }
  return out;
}

void drop_samples(const std::vector<int64_t>& positions, Dataset* data, StreamedImages* images) {
  if (positions.empty()) return;
  std::vector<int64_t> keep;
  keep.reserve(data->labels.size());
  size_t d = 0;
  for (size_t i = 0; i < data->labels.size(); ++i) {
    if (d < positions.size() && positions[d] == static_cast<int64_t>(i)) {
      ++d;
    } else {
      keep.push_back(static_cast<int64_t>(i));
    }
  }
  keep_samples(keep, data, images);
}

void keep_samples(const std::vector<int64_t>& positions, Dataset* data, StreamedImages* images) {
  const size_t item = data->pixels.empty() ? 0 : static_cast<size_t>(data->item_bytes());
  for (size_t k = 0; k < positions.size(); ++k) {
    const size_t i = static_cast<size_t>(positions[k]);
    if (i < k || i >= data->labels.size() || (k > 0 && positions[k - 1] >= positions[k])) {
      throw std::invalid_argument("keep_samples: positions not ascending within the dataset");
    }
    if (i == k) continue;
    data->labels[k] = data->labels[i];
    if (!data->ids.empty()) data->ids[k] = std::move(data->ids[i]);
    if (!data->texts.empty()) data->texts[k] = std::move(data->texts[i]);
    if (item > 0) std::memmove(&data->pixels[k * item], &data->pixels[i * item], item);
    if (images != nullptr && i < images->rows.size()) images->rows[k] = images->rows[i];
  }
  const size_t kept = positions.size();
  data->labels.resize(kept);
  if (!data->ids.empty()) data->ids.resize(kept);
  if (!data->texts.empty()) data->texts.resize(kept);
  if (item > 0) data->pixels.resize(kept * item);
  if (images != nullptr) images->rows.resize(std::min(images->rows.size(), kept));
}

}  // namespace recycle
