#include "bench/report_table.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace recycle::bench {

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != header_.size()) {
    throw std::logic_error("Table::add_row: " + std::to_string(cells.size()) + " cells under " +
                           std::to_string(header_.size()) + " columns");
  }
  rows_.push_back(std::move(cells));
}

namespace {

std::string piped(const std::vector<std::string>& cells) {
  std::string line = "|";
  for (const std::string& c : cells) line += " " + c + " |";
  return line + "\n";
}

std::string joined(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) line += (i == 0 ? "" : ",") + cells[i];
  return line + "\n";
}

}  // namespace

std::string Table::markdown() const {
  std::string out = piped(header_);
  out += piped(std::vector<std::string>(header_.size(), "---"));
  for (const auto& r : rows_) out += piped(r);
  return out;
}

std::string Table::csv() const {
  std::string out = joined(header_);
  for (const auto& r : rows_) out += joined(r);
  return out;
}

std::string csv_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_json(const std::string& path, const nlohmann::json& j) {
  write_text(path, j.dump(2) + "\n");
}

}  // namespace recycle::bench
