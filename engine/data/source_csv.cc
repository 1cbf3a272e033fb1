// csv:PATH: RFC 4180 comma-separated values with a header row naming the columns; the text in
// column --text-field, the label in --label-field (an integer or a name; text_labels.h). Fields
// may be quoted ("..."), with "" for a quote and line breaks inside; lines end in LF or CRLF;
// empty lines are skipped; a UTF-8 byte-order mark is ignored. PATH may be a folder: split S
// reads PATH/S.csv. Errors name FILE:LINE (the line where the record starts, or the quote).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "base/strings.h"
#include "engine/data/data_source.h"
#include "engine/data/text_labels.h"

namespace recycle {

namespace {

// Splits `bytes` into records of fields. record_lines[i]: the 1-based line record i starts on.
void parse_csv(const std::string& file, const std::string& bytes,
               std::vector<std::vector<std::string>>* records, std::vector<int64_t>* record_lines) {
  size_t i = bytes.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  int64_t line = 1;
  const size_t n = bytes.size();
  while (i < n) {
    // Skip empty lines.
    if (bytes[i] == '\n' || (bytes[i] == '\r' && i + 1 < n && bytes[i + 1] == '\n')) {
      i += bytes[i] == '\r' ? 2 : 1;
      ++line;
      continue;
    }
    std::vector<std::string> record;
    const int64_t start = line;
    while (true) {  // one field per turn
      std::string field;
      if (i < n && bytes[i] == '"') {
        const int64_t quote_line = line;
        ++i;
        while (true) {
          if (i >= n) {
            throw std::runtime_error(file + ":" + std::to_string(quote_line) +
                                     ": a quoted field that starts here never ends");
          }
          const char c = bytes[i++];
          if (c == '"') {
            if (i < n && bytes[i] == '"') {
              field += '"';
              ++i;
              continue;
            }
            break;
          }
          if (c == '\n') ++line;
          field += c;
        }
        if (i < n && bytes[i] != ',' && bytes[i] != '\n' && bytes[i] != '\r') {
          throw std::runtime_error(file + ":" + std::to_string(line) +
                                   ": text after a quoted field's closing quote (write \"\" "
                                   "for a quote inside it)");
        }
      } else {
        while (i < n && bytes[i] != ',' && bytes[i] != '\n' && bytes[i] != '\r') {
          if (bytes[i] == '"') {
            throw std::runtime_error(file + ":" + std::to_string(line) +
                                     ": a quote inside an unquoted field (quote the field and "
                                     "write \"\" for the quote)");
          }
          field += bytes[i++];
        }
      }
      record.push_back(std::move(field));
      if (i < n && bytes[i] == ',') {
        ++i;
        continue;
      }
      if (i < n && bytes[i] == '\r') {
        if (i + 1 < n && bytes[i + 1] == '\n') {
          ++i;
        } else {
          throw std::runtime_error(file + ":" + std::to_string(line) +
                                   ": a carriage return outside quotes without a line feed");
        }
      }
      if (i < n && bytes[i] == '\n') {
        ++i;
        ++line;
      }
      break;
    }
    records->push_back(std::move(record));
    record_lines->push_back(start);
  }
}

size_t column(const std::string& file, const std::vector<std::string>& header,
              const std::string& name, const char* flag) {
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] == name) return c;
  }
  std::string names;
  for (const std::string& h : header) names += (names.empty() ? "" : ", ") + h;
  throw std::runtime_error(file + ":1: no column '" + name + "' (" + flag + "; the columns: " +
                           names + ")");
}

SourceData load(const std::string& path, const DatasetOptions& options, bool /*stream*/) {
  const std::string file = text_source_file("csv", path, options.split, ".csv");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file + ": cannot read: " + std::strerror(errno));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(file + ": read error");
  std::vector<std::vector<std::string>> records;
  std::vector<int64_t> lines;
  parse_csv(file, bytes, &records, &lines);
  if (records.empty()) throw std::runtime_error(file + ": is empty (expected a header row)");
  const std::vector<std::string>& header = records[0];
  // A name twice would read one of its columns silently (which one, another tool decides
  // otherwise: pandas renames the second).
  for (size_t c = 0; c < header.size(); ++c) {
    for (size_t d = c + 1; d < header.size(); ++d) {
      if (header[c] == header[d]) {
        throw std::runtime_error(file + ":1: the header names column '" + printable(header[c]) +
                                 "' twice (columns " + std::to_string(c + 1) + " and " +
                                 std::to_string(d + 1) + "): give each column its own name");
      }
    }
  }
  const size_t text = column(file, header, options.text_field, "--text-field");
  const size_t label = column(file, header, options.label_field, "--label-field");
  std::vector<RawTextSample> samples;
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != header.size()) {
      throw std::runtime_error(file + ":" + std::to_string(lines[r]) + ": " +
                               std::to_string(records[r].size()) + " fields, the header has " +
                               std::to_string(header.size()));
    }
    if (records[r] == header) {  // files joined with cat: the second header would be a sample
      throw std::runtime_error(file + ":" + std::to_string(lines[r]) +
                               ": repeats the header row (files joined? keep one header)");
    }
    samples.push_back({std::move(records[r][text]), std::move(records[r][label]), lines[r]});
  }
  SourceData out;
  out.canonical = text_source_canonical("csv", path, options);
  out.data = text_dataset(file, std::move(samples));
  return out;
}

}  // namespace

DataSourceEntry csv_source() {
  DataSourceEntry e;
  e.name = "csv";
  e.text = true;
  e.usage = "csv:PATH";
  e.load = load;
  return e;
}

}  // namespace recycle
