// Where a streamed image split's pixels come from: a source (the IDX file, the files of an image
// folder) that hands out the pixels of its rows, in ascending row order, through readers.
// load_dataset(options, &images) (image_stream.h) returns one in StreamedImages::source, and
// ImageStream reads the dataset's samples through it. A new image source implements these two
// classes in its own file (see data_source.h). No LibTorch here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace recycle {

// A row the reader could not decode and left out (BadFilePolicy::kSkip only): its pixels in the
// output are zeros and must not be used; `what` is one line naming the file and the problem.
struct SkippedRow {
  int64_t row = 0;
  std::string what;
};

// Reads rows of one source in ascending order. Not thread safe (a reader may use threads inside
// read()); each pass over the split opens its own reader.
class PixelReader {
 public:
  virtual ~PixelReader() = default;
  // The pixels of rows[0..n) (ascending, each after every row read before) into out, `item`
  // bytes each (uint8, the dataset's item_shape, row-major), one after another. Throws
  // std::runtime_error naming the file for data that cannot be read (unless the source skips
  // bad files: then the row is recorded in skipped() and its bytes zeroed).
  virtual void read(const int64_t* rows, int64_t n, uint8_t* out) = 0;
  // Checks what the source holds after the last row read (IDX: the data all there, nothing
  // after it). Sources with nothing to check do nothing.
  virtual void finish() {}
  // Rows left out so far, in row order.
  virtual const std::vector<SkippedRow>& skipped() const {
    static const std::vector<SkippedRow> none;
    return none;
  }
};

// A streamed source: immutable once made, so readers may be opened from several threads.
class PixelSource {
 public:
  virtual ~PixelSource() = default;
  // What is streamed, for messages: a file or a folder.
  virtual std::string where() const = 0;
  // A reader for samples of item_shape {C, H, W} whose largest row is max_row (-1: none).
  // Throws std::runtime_error naming the file when the source no longer matches the dataset
  // (an IDX header that changed since load_dataset read it).
  virtual std::unique_ptr<PixelReader> open(const std::vector<int64_t>& item_shape,
                                            int64_t max_row) const = 0;
  // For a source whose item shape depends on its files (an image folder without a fixed output
  // size: the source's item_shape has 0 for height and width): the shape of the samples at
  // `rows` (the split after the class filter, the limit and the shard), from the first of them
  // that decodes. Sources whose shape is known do nothing.
  virtual void settle_shape(const std::vector<int64_t>& rows,
                            std::vector<int64_t>* item_shape) const {}
};

}  // namespace recycle
