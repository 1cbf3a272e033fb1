#include "engine/models/encoder_registry.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include "base/strings.h"
#include "engine/data/regular_file.h"
#include "engine/models/block_model.h"
#include "engine/models/pt2_model.h"
#include "engine/models/resnet18.h"
#include "engine/models/torchscript_model.h"
#include "engine/models/transformer.h"
#include "recycle/content_hasher.h"
#include "recycle/errors.h"

namespace recycle {

namespace {

// The largest model file read (its bytes are hashed in memory, then LibTorch loads it).
constexpr uintmax_t kMaxModelFileBytes = uintmax_t{4} << 30;

struct Entry {
  EncoderInfo info;
  std::function<BlockModel(const EncoderSpec&, int64_t classes)> make;
  // The digest of a file-loaded model's file (path, bytes); empty: the XXH3-128 of its bytes.
  std::function<std::string(const std::string&, const std::string&)> digest;
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {resnet18_info(), make_resnet18, {}},
      {transformer_info(), make_transformer, {}},
      {torchscript_info(), make_torchscript, {}},
      {pt2_info(), make_pt2, pt2_digest},
  };
  return entries;
}

const Entry& entry(const std::string& name) {
  for (const Entry& e : registry()) {
    if (e.info.name == name) return e;
  }
  throw std::invalid_argument("unknown model '" + name +
                              "' (known: " + join(encoder_names(), ", ") + ")");
}

// Sets spec->file to its absolute path and spec->digest to its digest (the entry's, else the
// XXH3-128 of its bytes); throws std::runtime_error when a digest was given and the file's differs.
void resolve_file(const std::string& text, const Entry& entry, EncoderSpec* spec) {
  if (spec->file.empty()) {
    throw std::invalid_argument("model spec '" + text + "' names no file (" + spec->name +
                                ":FILE)");
  }
  // A device or FIFO would be read without end, and the whole file is read into memory here:
  // only regular files, of at most kMaxModelFileBytes.
  std::string bytes;
  try {
    bytes = read_regular_file(spec->file, kMaxModelFileBytes);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument("model file " + std::string(e.what()));
  }
  const std::string path = std::filesystem::absolute(spec->file).lexically_normal().string();
  if (path.find(',') != std::string::npos || path.find('=') != std::string::npos) {
    throw std::invalid_argument("model file " + path + ": a path with ',' or '=' cannot be part of "
                                "a model spec (rename it or use a symbolic link)");
  }
  const std::string digest = entry.digest ? entry.digest(path, bytes) : hash128(bytes).to_hex();
  if (!spec->digest.empty() && spec->digest != digest) {
    throw std::runtime_error("model file " + path + " changed since this spec was made (xxh3 " +
                             spec->digest + ", now " + digest + ")");
  }
  spec->file = path;
  spec->digest = digest;
}

}  // namespace

std::vector<std::string> encoder_names() {
  std::vector<std::string> names;
  for (const Entry& e : registry()) names.push_back(e.info.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string default_encoder_name() { return registry().front().info.name; }

std::string input_name(EncoderInput input) {
  return input == EncoderInput::kText ? "text" : "image";
}

std::string default_encoder_for(EncoderInput input) {
  for (const Entry& e : registry()) {
    if (e.info.input == input) return e.info.name;
  }
  throw std::invalid_argument("no model reads " + input_name(input) + " data");
}

const EncoderInfo& encoder_info(const std::string& name) { return entry(name).info; }

EncoderSpec resolve_encoder_spec(const std::string& text) {
  const EncoderSpec given = EncoderSpec::parse(text);
  const Entry& e = entry(given.name);
  const EncoderInfo& info = e.info;
  for (const auto& [name, value] : given.options) {
    const bool known = std::any_of(info.options.begin(), info.options.end(),
                                   [&](const EncoderOption& o) { return o.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const EncoderOption& o : info.options) names.push_back(o.name);
      throw std::invalid_argument("model spec '" + text + "': " + info.name + " has no option '" +
                                  name + "' (options: " + join(names, ", ") + ")");
    }
  }
  EncoderSpec spec;
  spec.name = info.name;
  spec.file = given.file;
  spec.digest = given.digest;
  if (info.takes_file) {
    resolve_file(text, e, &spec);
  } else if (!given.file.empty() || !given.digest.empty()) {
    throw std::invalid_argument("model spec '" + text + "': " + info.name + " takes no file");
  }
  for (const EncoderOption& o : info.options) {
    const int64_t value = given.has(o.name) ? given.get(o.name) : o.default_value;
    if (value < o.min || value > o.max) {
      throw std::invalid_argument("model spec '" + text + "': " + o.name + " must be " +
                                  std::to_string(o.min) + ".." + std::to_string(o.max));
    }
    spec.options.emplace_back(o.name, value);
  }
  return spec;
}

std::vector<EncoderOption> input_shape_options() {
  return {{"in_channels", 1, 1, 4096, "input channels (set from the data)"},
          {"in_height", 28, 1, 65536, "input height (set from the data)"},
          {"in_width", 28, 1, 65536, "input width (set from the data)"}};
}

bool loads_a_program(const std::string& spec) {
  EncoderSpec parsed;
  try {
    parsed = EncoderSpec::parse(spec);
  } catch (const std::invalid_argument&) {
    return false;
  }
  const auto& entries = registry();
  return std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
    return e.info.name == parsed.name && e.info.takes_file;
  });
}

std::string spec_with_given_file(const std::string& stored, const std::string& given,
                                 const std::string& whose) {
  if (!loads_a_program(stored)) return stored;
  EncoderSpec spec = EncoderSpec::parse(stored);
  const std::string flag = spec.name + ":FILE";
  if (given.empty()) {
    throw InvalidArgument(whose + " was made from the program " + spec.file + " (" + flag +
                          "); the tools open no file that data names: give --model " + flag +
                          " (the file it was made from; loading it runs it)");
  }
  const EncoderSpec file = resolve_encoder_spec(given);  // reads the user's file: its digest
  if (file.name != spec.name || file.digest != spec.digest) {
    throw StaleCacheError(whose + " was made from " + flag + " with xxh3 " + spec.digest +
                          "; --model " + given + " is " +
                          (file.name != spec.name ? "another kind of model"
                                                  : "xxh3 " + file.digest) +
                          " (give the file it was made from)");
  }
  spec.file = file.file;
  return spec.to_string();
}

BlockModel make_encoder(const std::string& text, int64_t classes) {
  if (classes < 1) throw std::invalid_argument("a model needs at least one class");
  const EncoderSpec spec = resolve_encoder_spec(text);
  BlockModel model = entry(spec.name).make(spec, classes);
  model.spec = spec.to_string();
  return model;
}

}  // namespace recycle
