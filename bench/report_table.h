// The one table and file printer of recycle-bench's benchmarks: a table of text cells printed
// as Markdown ("| a | b |" under a "| --- |" line) or as CSV (cells joined by commas, no
// quoting: the benches' cells hold no commas), numbers for CSV cells in the stream's default
// form, and the JSON and text files every benchmark writes to its output directory.
// No LibTorch. Not thread safe (one table per caller).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace recycle::bench {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}

  // One row; it must have as many cells as the header (std::logic_error otherwise).
  void add_row(std::vector<std::string> cells);

  // "| h1 | h2 |\n| --- | --- |\n| c1 | c2 |\n..."
  std::string markdown() const;
  // "h1,h2\nc1,c2\n..."
  std::string csv() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// `v` as `std::ostream << v` prints it (6 significant digits): the CSV files' numbers.
std::string csv_number(double v);

// Writes `j` indented by 2 and a newline to `path`; `text` as is to `path`. Throw
// std::runtime_error with one line when the file cannot be written.
void write_json(const std::string& path, const nlohmann::json& j);
void write_text(const std::string& path, const std::string& text);

}  // namespace recycle::bench
