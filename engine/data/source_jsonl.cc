// jsonl:PATH: one JSON object per line, the text in --text-field (a string) and the label in
// --label-field (a non-negative integer or a string; text_labels.h maps them to ids). Empty
// lines are skipped. PATH may be a folder: split S reads PATH/S.jsonl.
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "engine/data/data_source.h"
#include "engine/data/text_labels.h"
#include "engine/data/tsv_reader.h"  // first_invalid_utf8

namespace recycle {

namespace {

SourceData load(const std::string& path, const DatasetOptions& options, bool /*stream*/) {
  const std::string file = text_source_file("jsonl", path, options.split, ".jsonl");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file + ": cannot read: " + std::strerror(errno));
  std::vector<RawTextSample> samples;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (number == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string at = file + ":" + std::to_string(number) + ": ";
    // JSON is UTF-8 (RFC 8259): another encoding is named as such, without echoing its bytes.
    if (const size_t bad = first_invalid_utf8(line); bad != std::string_view::npos) {
      throw std::runtime_error(at + "not valid UTF-8 (at byte " + std::to_string(bad + 1) +
                               "; JSON Lines files are UTF-8: convert it, e.g. iconv -t UTF-8)");
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      std::string why = e.what();
      const size_t colon = why.rfind(": ");
      throw std::runtime_error(at + "not JSON (" +
                               (colon == std::string::npos ? why : why.substr(colon + 2)) + ")");
    }
    if (!j.is_object()) throw std::runtime_error(at + "not a JSON object");
    RawTextSample s;
    s.line = number;
    const auto text = j.find(options.text_field);
    if (text == j.end() || !text->is_string()) {
      throw std::runtime_error(at + "no string field '" + options.text_field + "' (--text-field)");
    }
    s.text = text->get<std::string>();
    const auto label = j.find(options.label_field);
    if (label == j.end()) {
      throw std::runtime_error(at + "no field '" + options.label_field + "' (--label-field)");
    }
    if (label->is_string()) {
      s.label = label->get<std::string>();
    } else if (label->is_number_unsigned() ||
               (label->is_number_integer() && label->get<int64_t>() >= 0)) {
      s.label = std::to_string(label->get<uint64_t>());
    } else {
      throw std::runtime_error(at + "label " + label->dump() +
                               " is neither a non-negative integer nor a string");
    }
    samples.push_back(std::move(s));
  }
  if (in.bad()) throw std::runtime_error(file + ": read error");
  SourceData out;
  out.canonical = text_source_canonical("jsonl", path, options);
  out.data = text_dataset(file, std::move(samples));
  return out;
}

}  // namespace

DataSourceEntry jsonl_source() {
  DataSourceEntry e;
  e.name = "jsonl";
  e.text = true;
  e.usage = "jsonl:PATH";
  e.load = load;
  return e;
}

}  // namespace recycle
