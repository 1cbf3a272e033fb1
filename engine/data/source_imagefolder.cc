// imagefolder:DIR: torchvision's ImageFolder layout. The classes are DIR's sub-folders in
// sorted order (labels 0, 1, ...); a class's samples are the .png, .jpg and .jpeg files under
// its folder (sub-folders included, as os.walk sorted), other files are ignored and counted.
// --split NAME reads DIR/NAME/ when that folder exists; else DIR is the split when NAME is train
// or DIR is itself named NAME, and any other NAME is refused (it would read the training images
// again). Files are decoded
// (image_decode.h) and transformed (--transform, image_transform.h) when they are read, a chunk
// at a time and in parallel: memory holds the list of files, never the split's pixels.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <map>
#include <stdexcept>

#include "engine/data/data_source.h"
#include "engine/data/image_decode.h"
#include "engine/data/image_transform.h"
#include "engine/util/parallel_loop.h"

namespace fs = std::filesystem;

namespace recycle {

namespace {

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

std::string shape_text(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

struct FolderFiles {
  std::string root;                // the split's folder
  std::vector<std::string> files;  // full paths, in sample order
  ImageTransform transform;
  BadFilePolicy on_bad_file = BadFilePolicy::kFail;
};

// Decodes and transforms file `row` into out (item bytes); throws naming the file.
void read_file(const FolderFiles& f, int64_t row, const std::vector<int64_t>& item_shape,
               uint8_t* out) {
  const std::string& path = f.files[static_cast<size_t>(row)];
  const DecodedImage img = decode_image_file(path);
  int64_t oh = 0, ow = 0;
  f.transform.output_size(img.height, img.width, &oh, &ow);
  if (oh != item_shape[1] || ow != item_shape[2]) {
    throw std::invalid_argument(
        path + ": is " + shape_text(oh, ow) + " after the transform (" + f.transform.spec() +
        "), the split's images are " + shape_text(item_shape[1], item_shape[2]) +
        " (the size of its first image); give --transform resize=S,center-crop=S");
  }
  f.transform.apply(img.pixels.data(), img.height, img.width, img.channels, out);
}

class FolderReader : public PixelReader {
 public:
  FolderReader(std::shared_ptr<const FolderFiles> files, std::vector<int64_t> item_shape)
      : files_(std::move(files)), item_shape_(std::move(item_shape)) {
    item_ = item_shape_[0] * item_shape_[1] * item_shape_[2];
  }

  // Decodes the files in parallel; the first bad one in row order decides the error, so the
  // message does not depend on the threads' timing.
  void read(const int64_t* rows, int64_t n, uint8_t* out) override {
    const FolderFiles& f = *files_;
    const bool skip = f.on_bad_file == BadFilePolicy::kSkip;
    std::vector<std::string> errors(static_cast<size_t>(n));
    std::vector<char> fatal(static_cast<size_t>(n), 0);  // another size: never skipped
    parallel_loop(n, [&](int64_t i) {
      uint8_t* dst = out + i * item_;
      try {
        read_file(f, rows[i], item_shape_, dst);
      } catch (const std::invalid_argument& e) {
        errors[i] = e.what();
        fatal[i] = 1;
      } catch (const std::runtime_error& e) {
        errors[i] = e.what();
        std::fill(dst, dst + item_, uint8_t{0});
      }
    });
    for (int64_t i = 0; i < n; ++i) {
      if (errors[i].empty()) continue;
      if (fatal[i]) throw std::runtime_error(errors[i]);
      if (!skip) {
        throw std::runtime_error(errors[i] + " (--on-bad-file skip leaves such files out)");
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      if (!errors[i].empty()) skipped_.push_back(SkippedRow{rows[i], errors[i]});
    }
  }

  const std::vector<SkippedRow>& skipped() const override { return skipped_; }

 private:
  std::shared_ptr<const FolderFiles> files_;
  std::vector<int64_t> item_shape_;
  int64_t item_ = 0;
  std::vector<SkippedRow> skipped_;
};

class FolderPixels : public PixelSource {
 public:
  explicit FolderPixels(std::shared_ptr<const FolderFiles> files) : files_(std::move(files)) {}
  std::string where() const override { return files_->root; }

  std::unique_ptr<PixelReader> open(const std::vector<int64_t>& item_shape,
                                    int64_t max_row) const override {
    if (item_shape.size() != 3 || max_row >= static_cast<int64_t>(files_->files.size())) {
      throw std::invalid_argument("imagefolder " + files_->root + ": a reader for other samples");
    }
    return std::make_unique<FolderReader>(files_, item_shape);
  }

  void settle_shape(const std::vector<int64_t>& rows,
                    std::vector<int64_t>* item_shape) const override {
    if ((*item_shape)[1] > 0) return;
    const FolderFiles& f = *files_;
    for (int64_t row : rows) {
      try {
        const DecodedImage img = decode_image_file(f.files[static_cast<size_t>(row)]);
        f.transform.output_size(img.height, img.width, &(*item_shape)[1], &(*item_shape)[2]);
        return;
      } catch (const std::runtime_error& e) {
        if (f.on_bad_file != BadFilePolicy::kSkip) {
          throw std::runtime_error(std::string(e.what()) +
                                   " (--on-bad-file skip leaves such files out)");
        }
      }
    }
    throw std::runtime_error("imagefolder " + f.root + ": no file of the split can be decoded");
  }

 private:
  std::shared_ptr<const FolderFiles> files_;
};

// The folder of split `split` of imagefolder:`path`: PATH/SPLIT when it exists, else PATH when
// the split is train or PATH is named SPLIT; refuses any other split, and a PATH that is no folder.
fs::path split_folder(const std::string& path, const std::string& split) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    throw std::runtime_error("imagefolder:" + path + " is not a folder");
  }
  fs::path root = path;
  const bool named =
      !split.empty() && split.find('/') == std::string::npos && split != "." && split != "..";
  const fs::path normal = root.lexically_normal();  // "DIR/" -> its name from the parent
  const std::string own_name =
      (normal.has_filename() ? normal.filename() : normal.parent_path().filename()).string();
  if (named && fs::is_directory(root / split, ec)) {
    root /= split;
  } else if (named && split != "train" && own_name != split) {
    // Without DIR/SPLIT, DIR's folders are classes: another split would be the training images
    // again (and "test accuracy" measured on them). The split's own folder, named SPLIT, says
    // which images it holds.
    std::vector<std::string> folders;
    for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
      if (e.is_directory()) folders.push_back(e.path().filename().string());
    }
    std::sort(folders.begin(), folders.end());
    if (folders.size() > 4) folders.resize(4), folders.push_back("...");
    std::string listed;
    for (const std::string& f : folders) listed += (listed.empty() ? "" : ", ") + f;
    throw std::invalid_argument("imagefolder:" + path + " has no folder '" + split +
                                "' (its folders " + listed + " are classes, so split '" + split +
                                "' would be the training images again): put its "
                                "images in " +
                                (root / split).string() +
                                "/<class>/, or give the split's own folder, "
                                "named " +
                                split + ", as --data imagefolder:PATH/" + split);
  }
  return root;
}

// The class folders of split folder `root` (named `root_name`), in sorted order; throws where
// there is none.
std::vector<std::string> class_folders(const fs::path& root, const std::string& root_name) {
  std::vector<std::string> classes;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    if (e.is_directory()) classes.push_back(e.path().filename().string());
  }
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) {
    throw std::runtime_error("imagefolder " + root_name + " has no class folders (expected " +
                             root_name + "/<class>/<image>)");
  }
  return classes;
}

// The image files under class folder `dir` by the folder that holds them (`dir` itself always
// listed), their names unsorted; other files are counted in *ignored, the first named.
std::map<std::string, std::vector<std::string>> images_by_folder(const fs::path& dir,
                                                                 int64_t* ignored,
                                                                 std::string* first_ignored) {
  std::map<std::string, std::vector<std::string>> by_folder;
  by_folder[dir.string()];
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink);
       it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory()) continue;
    if (!is_image_name(it->path())) {
      if ((*ignored)++ == 0) *first_ignored = it->path().string();
      continue;
    }
    by_folder[it->path().parent_path().string()].push_back(it->path().filename().string());
  }
  return by_folder;
}

SourceData load(const std::string& path, const DatasetOptions& options, bool /*stream*/) {
  auto files = std::make_shared<FolderFiles>();
  files->transform = ImageTransform::parse(options.transform, options.encoder_input);
  files->on_bad_file = options.on_bad_file;
  const fs::path root = split_folder(path, options.split);
  files->root = root.string();
  const std::vector<std::string> classes = class_folders(root, files->root);
  SourceData out;
  out.canonical = "imagefolder:" + path;
  Dataset& d = out.data;
  d.class_names = classes;
  int64_t ignored = 0;
  std::string first_ignored;
  for (size_t c = 0; c < classes.size(); ++c) {
    // As torchvision's sorted(os.walk(class folder)): folders in sorted order, each one's
    // files sorted by name.
    std::map<std::string, std::vector<std::string>> by_folder =
        images_by_folder(root / classes[c], &ignored, &first_ignored);
    const size_t before = files->files.size();
    for (auto& [folder, names] : by_folder) {
      std::sort(names.begin(), names.end());
      for (const std::string& name : names) {
        const fs::path file = fs::path(folder) / name;
        files->files.push_back(file.string());
        d.labels.push_back(static_cast<int64_t>(c));
        d.ids.push_back(file.lexically_relative(root).generic_string());
      }
    }
    if (files->files.size() == before) {
      throw std::runtime_error("imagefolder " + files->root + ": class folder '" + classes[c] +
                               "' has no .png, .jpg or .jpeg file");
    }
  }
  if (ignored > 0) {
    std::cerr << "imagefolder " << files->root << ": " << ignored
              << " file(s) without a .png, .jpg or .jpeg name ignored (the first: " << first_ignored
              << ")" << std::endl;
  }
  const ImageTransform& t = files->transform;
  d.item_shape = {t.channels, t.has_size() ? t.crop : 0, t.has_size() ? t.crop : 0};
  d.transform = t.spec();
  d.norm_mean = t.mean;
  d.norm_std = t.std;
  out.source = std::make_shared<FolderPixels>(std::move(files));
  return out;
}

}  // namespace

DataSourceEntry imagefolder_source() {
  DataSourceEntry e;
  e.name = "imagefolder";
  e.usage = "imagefolder:DIR";
  e.sized_by_encoder = true;
  e.load = load;
  return e;
}

}  // namespace recycle
