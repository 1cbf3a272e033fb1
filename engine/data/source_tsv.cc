// tsv:FILE reads `label<TAB>text` lines (see tsv_reader.h) whatever the split (the split only
// names it); tsv:DIR reads DIR/SPLIT.tsv.
#include <filesystem>
#include <stdexcept>

#include "engine/data/data_source.h"
#include "engine/data/tsv_reader.h"

namespace recycle {

namespace {

std::string tsv_path(const std::string& path, const std::string& split) {
  if (!std::filesystem::is_directory(path)) return path;
  if (split.empty() || split.find('/') != std::string::npos || split == "." || split == "..") {
    throw std::invalid_argument("tsv:" + path + ": split '" + split + "' cannot name a file");
  }
  const std::string file = (std::filesystem::path(path) / (split + ".tsv")).string();
  if (!std::filesystem::exists(file)) {
    throw std::runtime_error("tsv:" + path + " is a folder without " + split +
                             ".tsv (for --split " + split + ")");
  }
  return file;
}

SourceData load(const std::string& path, const DatasetOptions& options, bool /*stream*/) {
  TsvData tsv = read_tsv_file(tsv_path(path, options.split));
  SourceData out;
  out.canonical = "tsv:" + path;
  Dataset& d = out.data;
  d.is_text = true;
  d.texts = std::move(tsv.texts);
  d.labels = std::move(tsv.labels);
  d.class_names = std::move(tsv.class_names);
  d.ids.resize(d.labels.size());
  for (size_t i = 0; i < d.ids.size(); ++i) {
    d.ids[i] = "line/" + std::to_string(tsv.line_numbers[i]);
  }
  return out;
}

}  // namespace

DataSourceEntry tsv_source() {
  DataSourceEntry e;
  e.name = "tsv";
  e.text = true;
  e.usage = "tsv:FILE, tsv:DIR";
  e.load = load;
  return e;
}

}  // namespace recycle
