// convert_old_file and convert_old_cache_head (recycle/cache.h): the files an older recycle wrote
// as TorchScript archives (torch::serialize), made tensor files (engine/models/tensor_file.h).
// Loading an archive runs any code it holds: these run only when a user asks for them by name
// (recycle-inspect --convert-old), for files they trust.
#include <torch/torch.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "cache/open_existing.h"
#include "cache/split_writer.h"
#include "engine/data/regular_file.h"
#include "engine/jobs/head_file.h"
#include "engine/jobs/train_job_parts.h"  // model_of_cache
#include "engine/models/encoder_registry.h"
#include "engine/models/split_model.h"
#include "engine/models/tensor_file.h"
#include "engine/models/weights_io.h"
#include "engine/models/zip_checksums.h"
#include "recycle/cache.h"
#include "recycle/errors.h"

namespace recycle {

namespace {

// Loads `module`'s parameters and buffers from the archive, naming `what` when they do not fit.
void load_archive(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                  const std::string& what) {
  try {
    torch::NoGradGuard no_grad;
    module.load(archive);
  } catch (const c10::Error& e) {
    throw std::runtime_error(what + " does not fit its model: " + e.what_without_backtrace());
  }
}

// An entry of the archive as a string, or "" when it has none.
std::string string_entry(torch::serialize::InputArchive& archive, const char* key) {
  c10::IValue value;
  return archive.try_read(key, value) && value.isString() ? value.toStringRef() : "";
}

}  // namespace

std::string convert_old_file(const std::string& path, const std::string& out,
                             const std::string& model_given) {
  if (!is_torch_archive(read_regular_file(path))) {
    throw InvalidArgument(path + " is not a file of an older recycle (no TorchScript archive): "
                          "nothing to convert");
  }
  if (out.empty()) throw InvalidArgument("--convert-old FILE needs --to NEW, the file to write");
  verify_zip_checksums(path);
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw std::runtime_error(path + " does not load as an archive: " + e.what_without_backtrace());
  }
  const std::string spec = string_entry(archive, "recycle.spec");
  if (!spec.empty()) {  // weights: save_block_model's entries
    c10::IValue classes, names;
    if (!archive.try_read("recycle.classes", classes) || !classes.isInt()) {
      throw std::runtime_error(path + " is not a model saved by recycle-train --save-model");
    }
    BlockModel model =
        make_encoder(spec_with_given_file(spec, model_given, "weights " + path), classes.toInt());
    if (archive.try_read("recycle.class_names", names)) {
      for (const c10::IValue& n : names.toListRef()) model.class_names.push_back(n.toStringRef());
    }
    load_archive(*model.as_stack(), archive, "weights " + path);
    save_block_model(model, out);
    return "weights";
  }
  const std::string head = string_entry(archive, "recycle.head");
  if (head.empty()) {
    throw InvalidArgument(path + " is neither weights (--save-model) nor a head (--save-head) of "
                          "an older recycle: nothing to convert");
  }
  if (!string_entry(archive, "recycle.checkpoint").empty()) {
    throw InvalidArgument(path + " is a checkpoint of an older recycle, which is not converted: "
                          "move it away, and the run starts over");
  }
  const HeadIdentity identity = head_identity_from_json(head, path);
  BlockModel model = make_encoder(
      spec_with_given_file(identity.identity.model, model_given, "head file " + path),
      static_cast<int64_t>(identity.class_names.size()));
  SplitModel split = split_block_model(model, identity.identity.prefix_blocks);
  load_archive(*split.head, archive, "head file " + path);
  save_head(split.head, identity, out);
  return "head";
}

void convert_old_cache_head(const std::string& dir, const std::string& model_given) {
  Manifest m;
  std::unique_ptr<ActivationStore> store = open_cache_to_add(dir, &m);
  std::string bytes;
  store->get_blob("head", &bytes).throw_if_error();
  if (!is_torch_archive(bytes)) {
    throw InvalidArgument("cache " + dir + " stores its head as a tensor file already: nothing "
                          "to convert");
  }
  BlockModel model;
  SplitModel split = model_of_cache(m, dir, model_given, &model);  // as training makes it
  std::istringstream in(bytes);
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(in);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cache " + dir + ": its stored head does not load: " +
                             e.what_without_backtrace());
  }
  load_archive(*split.head, archive, "cache " + dir + "'s stored head");
  SplitWriter::write_blob(store.get(), "head", module_to_bytes(*split.head));
}

}  // namespace recycle
