// A split whose images stay on disk, read in sample order a chunk at a time, so a reader holds
// one chunk of images, never the split. recycle-build reads its split twice this way: once to
// key every sample (key_samples), once, forward, for the samples it computes (compute_chunk).
// No LibTorch here. Not thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/idx_reader.h"

namespace recycle {

// Where a streamed dataset's pixels are: sample i is row rows[i] (ascending) of the IDX file.
struct StreamedImages {
  std::string file;           // "" when the data was loaded whole (text data)
  std::vector<int64_t> rows;
  bool streamed() const { return !file.empty(); }
};

// load_dataset without the pixels: for fashion-mnist it reads the labels and the images'
// header, leaves Dataset::pixels empty and says in *images where they are; other data (text)
// is loaded whole and images->file is "". The dataset (description, labels, ids, class names,
// item shape) is load_dataset's, with the same errors. Defined in dataset.cc beside
// load_dataset, whose class filter and limit it shares.
Dataset load_dataset(const DatasetOptions& options, StreamedImages* images);

class ImageStream {
 public:
  // `data` and `images` (from load_dataset above, images->streamed()) must outlive the stream.
  // Opens the pixel file and checks its header against the dataset; throws
  // std::runtime_error naming the file.
  ImageStream(const Dataset& data, const StreamedImages& images);

  // The pixels of samples positions[0..n) (ascending, and after every position read before)
  // into out, item_bytes() each, one after another. Rows in between are read and dropped.
  // Throws std::invalid_argument for a position out of order or out of range, and the IDX
  // reader's errors (short data, gzip errors) when the file does not hold them.
  void read(const int64_t* positions, int64_t n, uint8_t* out);
  // Reads the rest of the file and checks it (the data all there, nothing after it): what
  // read_idx_file checks when it loads the whole file.
  void finish();

 private:
  const Dataset& data_;
  const StreamedImages& images_;
  IdxStream file_;
  int64_t next_position_ = 0;  // the lowest position read may still be asked
  int64_t next_row_ = 0;       // the row the file is at
};

}  // namespace recycle
