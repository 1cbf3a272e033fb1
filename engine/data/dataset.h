// Datasets: the samples a build or a training run reads, held in memory. No LibTorch here.
//   fashion-mnist[:DIR]  Debian's IDX .gz files (DIR defaults to
//                        /usr/share/datasets/fashion-mnist); split "train" reads train-*,
//                        "test" reads t10k-*.
//   tsv:FILE             `label<TAB>text` lines (see tsv_reader.h); the split only names it.
//   tsv:DIR              a folder of such files, one per split: split S reads DIR/S.tsv.
//   imagefolder:DIR      torchvision's ImageFolder layout, PNG and JPEG (source_imagefolder.cc).
//   npy:DIR              DIR/<split>_x.npy (uint8 or float32; or integer token ids with
//                        <split>_mask.npy) and <split>_y.npy (source_npy.cc).
// Each source is a file of its own; data_source.h lists them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/keyer.h"
#include "recycle/options.h"  // DatasetOptions

namespace recycle {

constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct Dataset {
  std::string description;  // canonical: spec, split, classes and limit
  std::string classes;      // the --classes filter it was read with ("" for every class)
  bool is_text = false;
  std::vector<int64_t> item_shape;  // images: {channels, height, width}
  // images: size() * item_bytes() bytes, row-major: uint8 values, or float32 (host order) when
  // float_pixels (npy:DIR of float32: inputs made elsewhere, which image_batch takes as they are)
  std::vector<uint8_t> pixels;
  bool float_pixels = false;
  // npy:DIR of integer token ids with their attention mask (a tokenizer's output): item_shape
  // {2, L}, int64 values (host order), row 0 the ids, row 1 the mask (1s then 0s, at least one
  // 1). Only a pt2 text prefix (recycle.export of recycle.hf.split's prefix) takes them.
  bool token_ids = false;
  std::vector<std::string> texts;   // text: one per sample
  std::vector<int64_t> labels;      // 0..class_names.size()-1
  std::vector<std::string> ids;     // stable per-sample ids, e.g. "train/123" (source position)
  std::vector<std::string> class_names;
  // Images decoded from files: the canonical --transform spec that made the pixels from them
  // (image_transform.h); "" for pixels read as stored (IDX).
  std::string transform;
  // How image_batch normalises pixels/255: per channel (or one value for all) mean and std;
  // empty: the built-in normalisation (engine/models/preprocess.h).
  std::vector<float> norm_mean, norm_std;

  size_t size() const { return labels.size(); }
  int64_t item_bytes() const;  // product(item_shape) times 1, 4 for float_pixels, 8 for token_ids
  const uint8_t* item_pixels(size_t i) const { return pixels.data() + i * item_bytes(); }
  // What a keyer sees for sample i: the pixel tensor (uint8, item_shape), the text and the id;
  // token ids: int64 [2, its length], the ids and mask of its own positions (a view that skips
  // the padding, so that the same text padded to another length has the same key).
  // `view` is storage for the tensor view and must outlive the returned input.
  KeyInput key_input(size_t i, TensorView* view) const;
};

// Loads a dataset. Throws std::runtime_error with one clear line (naming the file) on bad
// input, std::invalid_argument on bad options.
Dataset load_dataset(const DatasetOptions& options);

// Gives `d` (split `split`) the classes `class_names`, those of the training split after
// --classes: each label is mapped to the class of the same name. A split may hold fewer classes
// than the training split (a test split with no example of one). A sample of a class the list
// does not hold is refused with std::runtime_error "split SPLIT holds class 'X' that SOURCE
// does not ..." (`source` names where the list comes from: "split train", "cache DIR").
void adopt_class_names(Dataset* d, const std::vector<std::string>& class_names,
                       const std::string& split, const std::string& source);

// Parses "5-9", "0,2,4" or "1-3,7" into sorted, distinct class ids. Throws on bad syntax.
std::vector<int64_t> parse_class_list(const std::string& text);

// The ten Fashion-MNIST class names in label order.
const std::vector<std::string>& fashion_mnist_class_names();

}  // namespace recycle
