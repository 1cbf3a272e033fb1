#include "engine/data/data_source.h"

namespace recycle {

const std::vector<DataSourceEntry>& data_sources() {
  static const std::vector<DataSourceEntry> sources = {fashion_mnist_source(), tsv_source(),
                                                       imagefolder_source(),   npy_source(),
                                                       jsonl_source(),         csv_source()};
  return sources;
}

const DataSourceEntry* find_data_source(const std::string& spec, std::string* path) {
  for (const DataSourceEntry& e : data_sources()) {
    if (e.bare && (spec == e.name || spec == e.name + ":")) {
      *path = "";
      return &e;
    }
    const std::string prefix = e.name + ":";
    if (spec.size() > prefix.size() && spec.compare(0, prefix.size(), prefix) == 0) {
      *path = spec.substr(prefix.size());
      return &e;
    }
  }
  return nullptr;
}

std::optional<DataSpec> parse_data_spec(const std::string& spec) {
  DataSpec d;
  const DataSourceEntry* e = find_data_source(spec, &d.path);
  if (e == nullptr) return std::nullopt;
  d.kind = e->name;
  d.text = e->text;
  d.sized_by_encoder = e->sized_by_encoder;
  return d;
}

std::string data_source_usages() {
  const std::vector<DataSourceEntry>& all = data_sources();
  std::string out;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0) out += i + 1 == all.size() ? " or " : ", ";
    out += all[i].usage;
  }
  return out;
}

}  // namespace recycle
