// BuildChunk: one chunk of a build's chunk loop, as it passes from the plan (which samples, which
// records to compute: engine/precompute/key_plan.h) through the split's inputs (their pixels,
// split_inputs.h) and the chunk encoder (the records, chunk_encoder.h) to the writer
// (build_stages.h). No LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "recycle/key.h"

namespace recycle {

struct BuildChunk {
  size_t begin = 0, end = 0;         // the range of the plan's todo() positions
  std::vector<int64_t> compute_pos;  // a sample position per record to compute
  std::vector<Key> compute_keys;     // distinct keys with no stored record, one per compute_pos
  // A split with views: the view of each compute key (whose key is then the view's,
  // keyers/view_key.h, and compute_pos may repeat a position once per view).
  std::vector<int64_t> compute_views;
  // ChunkEncoder::start: the prefix runs on it (finish takes its outputs), and a text chunk's
  // token length (its longest text's).
  bool started = false;
  int64_t input_length = 0;
  std::vector<std::string> records;  // ChunkEncoder: encoded records, one per compute key
  // ChunkReader::read, streamed image splits only: the pixels of the samples pixel_pos (the
  // chunk's todo positions, ascending), item_bytes() each. The encoder takes its samples'
  // images from here when set, else from the dataset in memory or a stream of its own.
  std::vector<uint8_t> pixels;
  std::vector<int64_t> pixel_pos;
};

}  // namespace recycle
