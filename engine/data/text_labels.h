// What the text sources share (tsv_reader.h's label rule, for jsonl:PATH and csv:PATH): labels
// as read (strings) -> class ids and names, and the checks on a sample's text. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/dataset.h"

namespace recycle {

// One sample of a text source as read: its text, its label's text (an integer's decimal
// digits, or a name), and the 1-based line where it starts.
struct RawTextSample {
  std::string text, label;
  int64_t line = 0;
};

// A text Dataset from raw samples (`where` names the file in errors): if every label is a
// non-negative integer (ASCII digits, at most 99999), ids are those integers and class names
// their decimal strings for 0..max; otherwise every label is a name, mapped to ids in sorted
// (byte-wise) order, the names kept as class_names. Ids of samples are "line/N". Throws
// std::runtime_error "FILE:LINE: reason" for an empty label, an empty text or one that is not
// valid UTF-8, and "FILE: has no samples" for none.
Dataset text_dataset(const std::string& where, std::vector<RawTextSample> samples);

// The file a text source `kind` ("jsonl", "csv") reads for split `split`: `path` itself when it
// is not a folder, else path/<split><ext>. Throws std::invalid_argument for a split that cannot
// name a file, std::runtime_error for a folder without that file.
std::string text_source_file(const std::string& kind, const std::string& path,
                             const std::string& split, const std::string& ext);

// The canonical spec of a text source with fields: "kind:path", plus " text-field=F" and
// " label-field=L" when they are not the defaults.
std::string text_source_canonical(const std::string& kind, const std::string& path,
                                  const DatasetOptions& options);

}  // namespace recycle
