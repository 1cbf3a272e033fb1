#include "engine/models/weights_io.h"

#include <nlohmann/json.hpp>

#include <sstream>
#include <stdexcept>

#include "engine/models/encoder_registry.h"
#include "engine/models/tensor_file.h"

namespace recycle {

namespace {

constexpr const char* kSpecEntry = "recycle.spec";
constexpr const char* kClassNamesEntry = "recycle.class_names";  // a JSON list
constexpr const char* kClassesEntry = "recycle.classes";

// The tensor file of weights, with its spec and class count: throws std::runtime_error naming
// `path` for a file that is not one.
TensorFile open_weights(const std::string& path) {
  TensorFile file = load_tensor_file(path, "weights " + path);
  if (!file.metadata.count(kSpecEntry) || !file.metadata.count(kClassesEntry)) {
    throw std::runtime_error(path + " is not a model saved by recycle-train --save-model");
  }
  return file;
}

}  // namespace

void save_block_model(const BlockModel& model, const std::string& path) {
  TensorFile file;
  add_module_state(*model.as_stack(), &file);
  file.metadata[kSpecEntry] = model.spec;
  file.metadata[kClassNamesEntry] = nlohmann::json(model.class_names).dump();
  file.metadata[kClassesEntry] = std::to_string(model.classifier->classes());
  try {
    save_tensor_file(file, path);  // atomically: a kill leaves the old file as it was
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("cannot write model weights to " + path + ": " + e.what());
  }
}

std::string read_weights_spec(const std::string& path) {
  return open_weights(path).metadata.at(kSpecEntry);
}

BlockModel load_block_model(const std::string& path, const std::string& model_given) {
  const TensorFile file = open_weights(path);
  int64_t classes = 0;
  try {
    classes = std::stoll(file.metadata.at(kClassesEntry));
  } catch (const std::exception&) {
    throw std::runtime_error("weights " + path + " are damaged: a bad class count");
  }
  const std::string spec =
      spec_with_given_file(file.metadata.at(kSpecEntry), model_given, "weights " + path);
  BlockModel model;
  try {
    model = make_encoder(spec, classes);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("weights " + path + " are for a model this version does not know: " +
                             e.what());
  }
  const auto names = file.metadata.find(kClassNamesEntry);
  if (names != file.metadata.end()) {
    try {
      model.class_names = nlohmann::json::parse(names->second).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
      throw std::runtime_error("weights " + path + " are damaged: bad class names");
    }
  }
  load_module_state(*model.as_stack(), file, "weights " + path);
  return model;
}

std::string module_to_bytes(const torch::nn::Module& module) {
  TensorFile file;
  add_module_state(module, &file);
  return to_safetensors(file);
}

void module_from_bytes(torch::nn::Module& module, const std::string& bytes,
                       const std::string& what) {
  load_module_state(module, from_safetensors(bytes, what), what);
}

}  // namespace recycle
