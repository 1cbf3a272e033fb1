// Reader for labelled text datasets stored as `label<TAB>text` lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace recycle {

struct TsvOptions {
  // Longest accepted line in bytes, not counting its "\n" or "\r\n" terminator. A longer line is
  // refused as soon as this many bytes have been read, so memory stays bounded by it.
  size_t max_line_bytes = 1 << 20;
};

// One parsed file. All four vectors except class_names have one entry per sample, in file order.
struct TsvData {
  std::vector<std::string> texts;        // the text after the first tab, exact bytes
                                         // (a trailing '\r' is removed)
  std::vector<int64_t> labels;           // class ids 0..k-1
  std::vector<std::string> class_names;  // class_names[id]
  std::vector<int64_t> line_numbers;     // 1-based source line of each sample
};

// Reads `label<TAB>text` lines from `path`. Lines end in "\n" or "\r\n"; the last line need not
// end at all. Completely empty lines ("" or "\r") are skipped; a UTF-8 byte-order mark at the
// start of the file is ignored. The label is everything before the first tab, the text
// everything after it (further tabs belong to the text). A first non-empty line that is
// exactly "label<TAB>text" (ASCII letters in any case) is a header and skipped: no class is
// named "label" (a sample whose label is "label" and text "text" cannot be the first line).
//
// A label is an integer class id or a class name: if every label is a non-negative integer
// (ASCII digits only), ids are those integers and class_names are their decimal strings for
// 0..max (ids above 99999 are refused); otherwise all labels are names, mapped to ids in
// sorted (byte-wise) order, and class_names lists them in that order.
//
// Throws std::runtime_error "FILE:LINE: reason" for: a line without a tab, an empty label, empty
// text, a label or text that is not valid UTF-8, a line longer than options.max_line_bytes, a
// read error; and "FILE: reason" for a file that cannot be opened or has no samples.
// Thread-safe (no shared state); the result is owned by the caller.
TsvData read_tsv_file(const std::string& path, const TsvOptions& options = {});

// True when `s` is valid UTF-8: no overlong encodings, no surrogates (U+D800..U+DFFF), nothing
// above U+10FFFF, no stray continuation bytes and no truncated sequences.
bool is_valid_utf8(std::string_view s);
// The offset of the first byte of the first invalid sequence in `s`, or std::string_view::npos.
size_t first_invalid_utf8(std::string_view s);

}  // namespace recycle
