#include "engine/data/text_labels.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "engine/data/tsv_reader.h"  // is_valid_utf8

namespace recycle {

namespace {

bool is_class_id(const std::string& s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

Dataset text_dataset(const std::string& where, std::vector<RawTextSample> samples) {
  if (samples.empty()) throw std::runtime_error(where + ": has no samples");
  bool numeric = true;
  for (const RawTextSample& s : samples) {
    const std::string at = where + ":" + std::to_string(s.line) + ": ";
    if (s.label.empty()) throw std::runtime_error(at + "empty label");
    if (s.text.empty()) throw std::runtime_error(at + "empty text");
    if (!is_valid_utf8(s.text)) throw std::runtime_error(at + "the text is not valid UTF-8");
    if (!is_valid_utf8(s.label)) throw std::runtime_error(at + "the label is not valid UTF-8");
    numeric = numeric && is_class_id(s.label);
  }
  Dataset d;
  d.is_text = true;
  std::map<std::string, int64_t> ids;
  if (numeric) {
    int64_t max = 0;
    for (const RawTextSample& s : samples) max = std::max<int64_t>(max, std::stoll(s.label));
    for (int64_t c = 0; c <= max; ++c) d.class_names.push_back(std::to_string(c));
  } else {
    for (const RawTextSample& s : samples) ids[s.label] = 0;
    for (auto& [name, id] : ids) {
      id = static_cast<int64_t>(d.class_names.size());
      d.class_names.push_back(name);
    }
  }
  d.texts.reserve(samples.size());
  for (RawTextSample& s : samples) {
    d.labels.push_back(numeric ? std::stoll(s.label) : ids.at(s.label));
    d.ids.push_back("line/" + std::to_string(s.line));
    d.texts.push_back(std::move(s.text));
  }
  return d;
}

std::string text_source_file(const std::string& kind, const std::string& path,
                             const std::string& split, const std::string& ext) {
  if (!std::filesystem::is_directory(path)) return path;
  if (split.empty() || split.find('/') != std::string::npos || split == "." || split == "..") {
    throw std::invalid_argument(kind + ":" + path + ": split '" + split + "' cannot name a file");
  }
  const std::string file = (std::filesystem::path(path) / (split + ext)).string();
  if (!std::filesystem::exists(file)) {
    throw std::runtime_error(kind + ":" + path + " is a folder without " + split + ext +
                             " (for --split " + split + ")");
  }
  return file;
}

std::string text_source_canonical(const std::string& kind, const std::string& path,
                                  const DatasetOptions& options) {
  const DatasetOptions defaults;
  std::string out = kind + ":" + path;
  if (options.text_field != defaults.text_field) out += " text-field=" + options.text_field;
  if (options.label_field != defaults.label_field) out += " label-field=" + options.label_field;
  return out;
}

}  // namespace recycle
