// The data sources behind --data SPEC: one entry per kind of spec ("fashion-mnist[:DIR]",
// "tsv:PATH", "imagefolder:DIR", "npy:DIR", "jsonl:PATH", "csv:PATH"), each in its own file
// (source_<name>.cc) that defines its entry function. load_dataset (dataset.cc) picks the entry by
// the spec's name, calls its load, then applies what every source shares: the class filter, the
// limit, the shard and the description. A new source is one file plus one line in data_sources()
// (data_source.cc) and one in CMakeLists.txt. No LibTorch here.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/pixel_source.h"

namespace recycle {

// What a source's load returns: every sample of the split in source order (labels, ids, class
// names; item_shape for images), with either the pixels or texts in `data`, or, for images,
// the pixels left where they are and `source` set (row i of the source is sample i).
struct SourceData {
  Dataset data;
  std::shared_ptr<const PixelSource> source;  // streamed images; null when data holds them
  std::string canonical;  // the spec as the description names it (e.g. a default DIR filled in)
};

struct DataSourceEntry {
  std::string name;   // the spec's part before ':' (or the whole spec when `bare` allows it)
  std::string usage;  // as --help and errors list it, e.g. "tsv:FILE or tsv:DIR"
  bool bare = false;  // the name alone is a spec (fashion-mnist: the default folder)
  bool text = false;  // its samples are texts (tsv, jsonl, csv), not images
  // Its images take the size of the encoder's input (imagefolder: DatasetOptions::encoder_input).
  bool sized_by_encoder = false;
  // Loads the split `options.split` of the data at `path` (the spec after "name:", "" for a
  // bare spec). stream: the caller wants the pixels streamed (images may then set `source`
  // and leave data.pixels empty); !stream: images must hold their pixels or set `source`
  // (load_dataset reads them through it). Throws std::runtime_error naming the file on bad
  // input, std::invalid_argument on bad options.
  SourceData (*load)(const std::string& path, const DatasetOptions& options, bool stream);
};

// Every source, in the order --help lists them.
const std::vector<DataSourceEntry>& data_sources();
// The entry whose spec this is, with *path set to the part after "name:"; null for none.
const DataSourceEntry* find_data_source(const std::string& spec, std::string* path);

// --data SPEC (KIND[:PATH]) as its parts: what the engine asks of a spec, parsed once here.
struct DataSpec {
  std::string kind;               // the source's name: "fashion-mnist", "tsv", "imagefolder", ...
  std::string path;               // the part after "kind:" ("" for a bare spec)
  bool text = false;              // its samples are texts (tsv, jsonl, csv), not images
  bool sized_by_encoder = false;  // its images take the encoder's input size (imagefolder)
};
// The spec's parts; nullopt when no source has it (DatasetOptions::validate refuses it:
// "unknown data 'X' (expected fashion-mnist[:DIR], tsv:FILE or tsv:DIR, ...)").
std::optional<DataSpec> parse_data_spec(const std::string& spec);
// "fashion-mnist[:DIR], tsv:FILE or tsv:DIR, imagefolder:DIR": the usages, for messages.
std::string data_source_usages();

// The entry functions, one per source file.
DataSourceEntry fashion_mnist_source();  // source_fashion_mnist.cc
DataSourceEntry tsv_source();            // source_tsv.cc
DataSourceEntry imagefolder_source();    // source_imagefolder.cc
DataSourceEntry npy_source();            // source_npy.cc
DataSourceEntry jsonl_source();          // source_jsonl.cc
DataSourceEntry csv_source();            // source_csv.cc

}  // namespace recycle
