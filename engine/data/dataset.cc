#include "engine/data/dataset.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <iostream>
#include <optional>

#include "engine/data/data_source.h"
#include "engine/data/image_stream.h"

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
  return token_ids ? 8 * n : float_pixels ? 4 * n : n;
}

KeyInput Dataset::key_input(size_t i, TensorView* view) const {
  KeyInput in;
  if (is_text) {
    in.text = texts[i];
    in.has_text = true;
  } else {
    view->dtype = token_ids ? "int64" : float_pixels ? "float32" : "uint8";
    view->shape = item_shape;
    view->strides = TensorView::contiguous_strides(item_shape);
    view->data = item_pixels(i);
    if (token_ids) {  // the ids and mask of the text's own positions: padding is not content
      const int64_t length = item_shape.at(1);
      const auto* mask = reinterpret_cast<const int64_t*>(item_pixels(i)) + length;
      int64_t valid = 0;
      while (valid < length && mask[valid] != 0) ++valid;
      view->shape = {2, valid};
      view->strides = {length, 1};
    }
    view->element_size = token_ids ? 8 : float_pixels ? 4 : 1;
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
  for (size_t i = 0; i < class_names.size(); ++i)
    id_of.emplace(class_names[i], static_cast<int64_t>(i));
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

}  // namespace

BadFilePolicy parse_bad_file_policy(std::string_view name) {
  if (name == "fail") return BadFilePolicy::kFail;
  if (name == "skip") return BadFilePolicy::kSkip;
  throw std::invalid_argument("--on-bad-file must be fail or skip, not '" + std::string(name) +
                              "'");
}

std::string bad_file_policy_name(BadFilePolicy policy) {
  return policy == BadFilePolicy::kSkip ? "skip" : "fail";
}

std::vector<std::string> bad_file_policy_names() { return {"fail", "skip"}; }

void report_skipped(const std::string& where,
                    const std::vector<std::pair<int64_t, std::string>>& skipped) {
  if (skipped.empty()) return;
  std::cerr << where << ": skipped " << skipped.size()
            << " file(s) that could not be decoded (--on-bad-file skip):\n";
  const size_t shown = std::min<size_t>(skipped.size(), 10);
  for (size_t i = 0; i < shown; ++i) std::cerr << "  " << skipped[i].second << "\n";
  if (shown < skipped.size()) std::cerr << "  ... and " << skipped.size() - shown << " more\n";
  std::cerr << std::flush;
}

namespace {

// The pixels of a streamed dataset read into d->pixels; the samples whose file was skipped
// (--on-bad-file skip) are dropped and reported on stderr.
void read_whole(Dataset* d, StreamedImages* images) {
  ImageStream stream(*d, *images);
  const int64_t n = static_cast<int64_t>(d->size());
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[i] = i;
  const int64_t item = d->item_bytes();
  d->pixels.resize(static_cast<size_t>(n * item));
  stream.read(positions.data(), n, d->pixels.data());
  stream.finish();
  const auto skipped = stream.skipped();
  if (skipped.empty()) return;
  report_skipped(images->file, skipped);
  std::vector<int64_t> drop;  // ascending, as skipped() gives them
  for (const auto& s : skipped) drop.push_back(s.first);
  drop_samples(drop, d, nullptr);  // their pixels too
  if (d->size() == 0) throw std::runtime_error(images->file + ": every file was skipped");
}

// load_dataset; streamed: see load_dataset(options, images) in image_stream.h.
Dataset load(const DatasetOptions& options, StreamedImages* streamed) {
  options.validate();
  const std::vector<int64_t> classes =
      options.classes.empty() ? std::vector<int64_t>() : parse_class_list(options.classes);
  const std::string& spec = options.spec;
  std::string path;
  const DataSourceEntry& entry = *find_data_source(spec, &path);  // validate() checked it
  SourceData loaded = entry.load(path, options, streamed != nullptr);
  Dataset d = std::move(loaded.data);
  const std::string& source = loaded.canonical;
  // A source that streams its pixels in any case is read whole below, through its stream.
  std::optional<StreamedImages> own;
  if (streamed == nullptr && loaded.source) streamed = &own.emplace();
  const bool rows = streamed != nullptr && loaded.source;
  if (rows) {
    streamed->source = loaded.source;
    streamed->file = loaded.source->where();
    streamed->rows.resize(d.labels.size());
    for (size_t i = 0; i < streamed->rows.size(); ++i) streamed->rows[i] = static_cast<int64_t>(i);
  }
  const int64_t item = d.item_bytes();
  auto move_item = [&](size_t src, size_t dst) {
    if (d.is_text) {
      if (src != dst) d.texts[dst] = std::move(d.texts[src]);
    } else if (rows) {
      streamed->rows[dst] = streamed->rows[src];
    } else if (src != dst) {
      std::copy_n(d.pixels.begin() + src * item, item, d.pixels.begin() + dst * item);
    }
  };
  filter_samples(&d, classes, options.limit, move_item);
  if (options.slice_count > 1) {
    const size_t count = static_cast<size_t>(options.slice_count);
    const size_t whole = d.labels.size() / count * count;
    size_t kept = 0;
    for (size_t i = static_cast<size_t>(options.slice_index); i < whole; i += count, ++kept) {
      move_item(i, kept);
      d.labels[kept] = d.labels[i];
      d.ids[kept] = d.ids[i];
    }
    d.labels.resize(kept);
    d.ids.resize(kept);
  }
  if (d.is_text) {
    d.texts.resize(d.labels.size());
  } else if (rows) {
    streamed->rows.resize(d.labels.size());
    streamed->rows.shrink_to_fit();
  } else {
    d.pixels.resize(d.labels.size() * item);
  }
  if (d.size() == 0) {
    throw std::runtime_error(
        "no samples left in " + spec + " after --classes" +
        (options.slice_count > 1 ? std::string(" and the ranks' slicing") : ""));
  }
  if (rows) streamed->source->settle_shape(streamed->rows, &d.item_shape);
  d.classes = options.classes;
  d.description = source + " split=" + options.split +
                  (options.classes.empty() ? "" : " classes=" + options.classes) +
                  (options.limit > 0 ? " limit=" + std::to_string(options.limit) : "") +
                  (options.slice_count > 1 ? " shard=" + std::to_string(options.slice_index) + "/" +
                                                 std::to_string(options.slice_count)
                                           : "");
  if (own) read_whole(&d, &*own);
  return d;
}

}  // namespace

Dataset load_dataset(const DatasetOptions& options) { return load(options, nullptr); }

Dataset load_dataset(const DatasetOptions& options, StreamedImages* images) {
  *images = StreamedImages();
  return load(options, images);
}

}  // namespace recycle
