#include "engine/data/dataset.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "engine/data/idx_reader.h"
#include "engine/data/image_stream.h"
#include "engine/data/tsv_reader.h"

namespace recycle {

const std::vector<std::string>& fashion_mnist_class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                                 "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                                 "Bag",         "Ankle boot"};
  return names;
}

int64_t Dataset::item_bytes() const {
  int64_t n = 1;
  for (int64_t d : item_shape) n *= d;
  return n;
}

KeyInput Dataset::key_input(size_t i, TensorView* view) const {
  KeyInput in;
  if (is_text) {
    in.text = texts[i];
    in.has_text = true;
  } else {
    view->dtype = "uint8";
    view->shape = item_shape;
    view->strides = TensorView::contiguous_strides(item_shape);
    view->data = item_pixels(i);
    view->element_size = 1;
    in.tensor = view;
  }
  in.id = ids[i];
  in.has_id = true;
  return in;
}

void adopt_class_names(Dataset* d, const std::vector<std::string>& class_names,
                       const std::string& split, const std::string& source) {
  if (d->class_names == class_names) return;
  std::unordered_map<std::string, int64_t> id_of;
  for (size_t i = 0; i < class_names.size(); ++i) id_of.emplace(class_names[i], static_cast<int64_t>(i));
  std::vector<int64_t> remap(d->class_names.size(), -1);
  for (size_t c = 0; c < d->class_names.size(); ++c) {
    const auto it = id_of.find(d->class_names[c]);
    if (it != id_of.end()) remap[c] = it->second;
  }
  for (int64_t& label : d->labels) {
    const int64_t to = remap.at(static_cast<size_t>(label));
    if (to < 0) {
      throw std::runtime_error("split " + split + " holds class '" + d->class_names[label] +
                               "' that " + source + " does not (classes come from the training "
                               "split and --classes: another split may hold fewer, not others)");
    }
    label = to;
  }
  d->class_names = class_names;
}

std::vector<int64_t> parse_class_list(const std::string& text) {
  std::set<int64_t> out;
  size_t pos = 0;
  auto bad = [&]() {
    return std::invalid_argument("--classes '" + text + "': expected a list like 5-9 or 0,2,4");
  };
  auto number = [&](size_t* p) {
    size_t start = *p;
    while (*p < text.size() && std::isdigit(static_cast<unsigned char>(text[*p]))) ++*p;
    if (*p == start || *p - start > 6) throw bad();
    return std::stoll(text.substr(start, *p - start));
  };
  while (pos < text.size()) {
    const int64_t lo = number(&pos);
    int64_t hi = lo;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      hi = number(&pos);
      if (hi < lo) throw bad();
    }
    for (int64_t c = lo; c <= hi; ++c) out.insert(c);
    if (pos < text.size()) {
      if (text[pos] != ',') throw bad();
      ++pos;
      if (pos == text.size()) throw bad();
    }
  }
  if (out.empty()) throw bad();
  return std::vector<int64_t>(out.begin(), out.end());
}

namespace {

// Keeps the samples whose class is in `classes` (relabelled by rank), then the first `limit`.
// `keep_item(src, dst)` moves sample src's payload to position dst.
template <typename KeepItem>
void filter_samples(Dataset* d, const std::vector<int64_t>& classes, int64_t limit,
                    KeepItem keep_item) {
  std::vector<int64_t> remap(d->class_names.size(), -1);
  std::vector<std::string> names;
  if (classes.empty()) {
    for (size_t c = 0; c < remap.size(); ++c) remap[c] = static_cast<int64_t>(c);
    names = d->class_names;
  } else {
    for (int64_t c : classes) {
      if (c < 0 || c >= static_cast<int64_t>(remap.size())) {
        throw std::invalid_argument("--classes names class " + std::to_string(c) +
                                    ", but the data has classes 0-" +
                                    std::to_string(remap.size() - 1));
      }
      remap[c] = static_cast<int64_t>(names.size());
      names.push_back(d->class_names[c]);
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < d->labels.size(); ++i) {
    if (limit > 0 && static_cast<int64_t>(kept) >= limit) break;
    const int64_t label = remap[d->labels[i]];
    if (label < 0) continue;
    keep_item(i, kept);
    d->labels[kept] = label;
    d->ids[kept] = d->ids[i];
    ++kept;
  }
  d->labels.resize(kept);
  d->ids.resize(kept);
  d->class_names = names;
}

// streamed: null to load the pixels; else the images' header only, rows 0..n-1 in *streamed.
Dataset load_fashion_mnist(const std::string& dir, const std::string& split,
                           StreamedImages* streamed) {
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    throw std::invalid_argument("fashion-mnist has splits train and test, not '" + split + "'");
  }
  const std::string image_file = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  IdxArray images;
  if (streamed == nullptr) {
    images = read_idx_file(image_file, 3);
  } else {
    images.dims = IdxStream(image_file, 3).dims();  // the header; the data is streamed
  }
  const IdxArray labels = read_idx_file(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 1);
  if (images.dims[0] != labels.dims[0]) {
    throw std::runtime_error(dir + ": " + std::to_string(images.dims[0]) + " images but " +
                             std::to_string(labels.dims[0]) + " labels");
  }
  Dataset d;
  d.class_names = fashion_mnist_class_names();
  d.item_shape = {1, images.dims[1], images.dims[2]};
  d.pixels = std::move(images.data);
  if (streamed != nullptr) {
    streamed->file = image_file;
    streamed->rows.resize(labels.data.size());
    for (size_t i = 0; i < streamed->rows.size(); ++i) streamed->rows[i] = static_cast<int64_t>(i);
  }
  d.labels.resize(labels.data.size());
  d.ids.resize(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= d.class_names.size()) {
      throw std::runtime_error(dir + ": label " + std::to_string(labels.data[i]) + " of sample " +
                               std::to_string(i) + " is not a Fashion-MNIST class (0-9)");
    }
    d.labels[i] = labels.data[i];
    d.ids[i] = split + "/" + std::to_string(i);
  }
  return d;
}

// tsv:FILE reads FILE whatever the split; tsv:DIR reads DIR/SPLIT.tsv.
std::string tsv_path(const std::string& path, const std::string& split) {
  if (!std::filesystem::is_directory(path)) return path;
  if (split.empty() || split.find('/') != std::string::npos || split == "." || split == "..") {
    throw std::invalid_argument("tsv:" + path + ": split '" + split + "' cannot name a file");
  }
  const std::string file = (std::filesystem::path(path) / (split + ".tsv")).string();
  if (!std::filesystem::exists(file)) {
    throw std::runtime_error("tsv:" + path + " is a folder without " + split + ".tsv (for --split " +
                             split + ")");
  }
  return file;
}

Dataset load_tsv(const std::string& path) {
  TsvData tsv = read_tsv_file(path);
  Dataset d;
  d.is_text = true;
  d.texts = std::move(tsv.texts);
  d.labels = std::move(tsv.labels);
  d.class_names = std::move(tsv.class_names);
  d.ids.resize(d.labels.size());
  for (size_t i = 0; i < d.ids.size(); ++i) d.ids[i] = "line/" + std::to_string(tsv.line_numbers[i]);
  return d;
}

}  // namespace

namespace {

bool is_fashion_mnist_spec(const std::string& spec) {
  return spec == "fashion-mnist" || spec.rfind("fashion-mnist:", 0) == 0;
}

}  // namespace

void DatasetOptions::validate() const {
  if (!is_fashion_mnist_spec(spec) && !(spec.rfind("tsv:", 0) == 0 && spec.size() > 4)) {
    throw std::invalid_argument("unknown data '" + spec +
                                "' (expected fashion-mnist[:DIR], tsv:FILE or tsv:DIR)");
  }
  if (limit < 0) throw std::invalid_argument("--limit must be 0 (all) or positive");
  if (shard_count < 1 || shard_index < 0 || shard_index >= shard_count) {
    throw std::invalid_argument("shard " + std::to_string(shard_index) + " of " +
                                std::to_string(shard_count) + " does not exist");
  }
}

namespace {

// load_dataset; streamed: see load_dataset(options, images) in image_stream.h.
Dataset load(const DatasetOptions& options, StreamedImages* streamed) {
  options.validate();
  const std::vector<int64_t> classes =
      options.classes.empty() ? std::vector<int64_t>() : parse_class_list(options.classes);
  const std::string& spec = options.spec;
  Dataset d;
  std::string source;
  if (is_fashion_mnist_spec(spec)) {
    const std::string dir = spec.size() > 14 ? spec.substr(14) : kDefaultFashionMnistDir;
    d = load_fashion_mnist(dir, options.split, streamed);
    source = "fashion-mnist:" + dir;
  } else {  // tsv: (validate() refused any other spec)
    d = load_tsv(tsv_path(spec.substr(4), options.split));
    source = spec;
  }
  const int64_t item = d.item_bytes();
  auto move_item = [&](size_t src, size_t dst) {
    if (d.is_text) {
      if (src != dst) d.texts[dst] = std::move(d.texts[src]);
    } else if (streamed != nullptr) {
      streamed->rows[dst] = streamed->rows[src];
    } else if (src != dst) {
      std::copy_n(d.pixels.begin() + src * item, item, d.pixels.begin() + dst * item);
    }
  };
  filter_samples(&d, classes, options.limit, move_item);
  if (options.shard_count > 1) {
    const size_t count = static_cast<size_t>(options.shard_count);
    const size_t whole = d.labels.size() / count * count;
    size_t kept = 0;
    for (size_t i = static_cast<size_t>(options.shard_index); i < whole; i += count, ++kept) {
      move_item(i, kept);
      d.labels[kept] = d.labels[i];
      d.ids[kept] = d.ids[i];
    }
    d.labels.resize(kept);
    d.ids.resize(kept);
  }
  if (d.is_text) {
    d.texts.resize(d.labels.size());
  } else if (streamed != nullptr) {
    streamed->rows.resize(d.labels.size());
    streamed->rows.shrink_to_fit();
  } else {
    d.pixels.resize(d.labels.size() * item);
  }
  if (d.size() == 0) {
    throw std::runtime_error("no samples left in " + spec + " after --classes" +
                             (options.shard_count > 1 ? std::string(" and sharding") : ""));
  }
  d.description = source + " split=" + options.split +
                  (options.classes.empty() ? "" : " classes=" + options.classes) +
                  (options.limit > 0 ? " limit=" + std::to_string(options.limit) : "") +
                  (options.shard_count > 1 ? " shard=" + std::to_string(options.shard_index) +
                                                 "/" + std::to_string(options.shard_count)
                                           : "");
  return d;
}

}  // namespace

Dataset load_dataset(const DatasetOptions& options) { return load(options, nullptr); }

Dataset load_dataset(const DatasetOptions& options, StreamedImages* images) {
  *images = StreamedImages();
  return load(options, images);
}

}  // namespace recycle
