#include "engine/models/weights_io.h"

#include <sstream>
#include <stdexcept>

#include "engine/models/encoder_registry.h"
#include "engine/models/zip_checksums.h"
#include "engine/util/atomic_file.h"

namespace recycle {

void save_block_model(const BlockModel& model, const std::string& path) {
  torch::serialize::OutputArchive archive;
  model.as_stack()->save(archive);
  archive.write("recycle.spec", c10::IValue(model.spec));
  c10::List<std::string> names;
  for (const auto& n : model.class_names) names.push_back(n);
  archive.write("recycle.class_names", c10::IValue(names));
  archive.write("recycle.classes", c10::IValue(model.classifier->classes()));
  // Atomically: a kill or a failure while writing leaves the old file as it was.
  write_file_atomically(path, [&](const std::string& temp) {
    try {
      archive.save_to(temp);
    } catch (const c10::Error& e) {
      throw std::runtime_error("cannot write model weights to " + path + ": " +
                               e.what_without_backtrace());
    }
  });
}

namespace {

// The archive of a weights file, its CRC-32s checked, and its spec and class count.
void open_weights(const std::string& path, torch::serialize::InputArchive* archive,
                  c10::IValue* spec_value, c10::IValue* classes_value) {
  verify_zip_checksums(path);
  try {
    archive->load_from(path);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot read model weights " + path +
                             " (not a file saved by --save-model?)");
  }
  if (!archive->try_read("recycle.spec", *spec_value) ||
      !archive->try_read("recycle.classes", *classes_value)) {
    throw std::runtime_error(path + " is not a model saved by recycle-train --save-model");
  }
}

}  // namespace

std::string read_weights_spec(const std::string& path) {
  torch::serialize::InputArchive archive;
  c10::IValue spec_value, classes_value;
  open_weights(path, &archive, &spec_value, &classes_value);
  return spec_value.toStringRef();
}

BlockModel load_block_model(const std::string& path) {
  torch::serialize::InputArchive archive;
  c10::IValue spec_value, names_value, classes_value;
  open_weights(path, &archive, &spec_value, &classes_value);
  BlockModel model;
  try {
    model = make_encoder(spec_value.toStringRef(), classes_value.toInt());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("weights " + path + " are for a model this version does not know: " +
                             e.what());
  }
  if (archive.try_read("recycle.class_names", names_value)) {
    for (const c10::IValue& n : names_value.toListRef()) {
      model.class_names.push_back(n.toStringRef());
    }
  }
  try {
    model.as_stack()->load(archive);
  } catch (const c10::Error& e) {
    throw std::runtime_error("weights " + path + " do not fit " + model.spec + ": " +
                             e.what_without_backtrace());
  }
  return model;
}

std::string module_to_bytes(const torch::nn::Module& module) {
  torch::serialize::OutputArchive archive;
  module.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void module_from_bytes(torch::nn::Module& module, const std::string& bytes) {
  std::istringstream in(bytes);
  torch::serialize::InputArchive archive;
  archive.load_from(in);
  module.load(archive);
}

}  // namespace recycle
