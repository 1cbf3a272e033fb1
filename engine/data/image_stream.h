// A split whose images stay on disk, read in sample order a chunk at a time, so a reader holds
// one chunk of images, never the split. recycle-build reads its split twice this way: once to
// key every sample (key_samples), once, forward, for the samples it computes (ChunkEncoder).
// The pixels come from the data source's PixelSource (pixel_source.h): the IDX file of
// fashion-mnist, the decoded and transformed files of imagefolder.
// No LibTorch here. Not thread safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/pixel_source.h"

namespace recycle {

// Where a streamed dataset's pixels are: sample i is row rows[i] (ascending) of the source.
struct StreamedImages {
  std::string file;  // source->where(): what is streamed; "" when the data was loaded whole
  std::vector<int64_t> rows;
  std::shared_ptr<const PixelSource> source;  // null when the data was loaded whole (text)
  bool streamed() const { return source != nullptr; }
};

// load_dataset without the pixels: for an image source it reads the labels (and what the
// source needs to know the item shape: the IDX header, the first image of a folder), leaves
// Dataset::pixels empty and says in *images where they are; other data (text) is loaded whole
// and images->streamed() is false. The dataset (description, labels, ids, class names, item
// shape) is load_dataset's, with the same errors, except that an image folder's files that
// cannot be decoded are found only when they are read (with --on-bad-file skip:
// ImageStream::skipped(), and the caller drops them with drop_skipped). Defined in dataset.cc
// beside load_dataset, whose class filter and limit it shares.
Dataset load_dataset(const DatasetOptions& options, StreamedImages* images);

class ImageStream {
 public:
  // `data` and `images` (from load_dataset above, images->streamed()) must outlive the stream.
  // Opens the source and checks it against the dataset; throws std::runtime_error naming the
  // file.
  ImageStream(const Dataset& data, const StreamedImages& images);

  // The pixels of samples positions[0..n) (ascending, and after every position read before)
  // into out, item_bytes() each, one after another. Rows in between are read and dropped
  // (IDX) or not read (files). Throws std::invalid_argument for a position out of order or out
  // of range, and the source's errors (IDX: short data, gzip errors; files: a file that cannot
  // be decoded, named) when it does not hold them.
  void read(const int64_t* positions, int64_t n, uint8_t* out);
  // Reads the rest of the source and checks it (IDX: the data all there, nothing after it):
  // what read_idx_file checks when it loads the whole file.
  void finish();
  // Positions read so far whose file could not be decoded and was skipped (--on-bad-file
  // skip), ascending, each with one line naming the file; their pixels are zeros.
  std::vector<std::pair<int64_t, std::string>> skipped() const;

 private:
  const Dataset& data_;
  const StreamedImages& images_;
  std::unique_ptr<PixelReader> reader_;
  int64_t next_position_ = 0;  // the lowest position read may still be asked
  std::vector<int64_t> rows_;  // scratch: the rows of a read
};

// Removes samples `positions` (ascending) from a dataset: keep_samples of the others.
void drop_samples(const std::vector<int64_t>& positions, Dataset* data, StreamedImages* images);
// Keeps only samples `positions` (ascending, distinct) of a dataset, in that order: labels, ids,
// texts, pixels in memory and the rows of its stream (images not null).
void keep_samples(const std::vector<int64_t>& positions, Dataset* data, StreamedImages* images);

// Prints on stderr, for what `where` names, how many samples were skipped and the lines of the
// first ten (ImageStream::skipped()'s). Nothing for none.
void report_skipped(const std::string& where,
                    const std::vector<std::pair<int64_t, std::string>>& skipped);

}  // namespace recycle
