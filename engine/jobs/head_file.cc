#include "engine/jobs/head_file.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "cache/json_fields.h"
#include "engine/data/regular_file.h"
#include "engine/models/tensor_file.h"
#include "engine/precompute/prefix_identity.h"

namespace recycle {

namespace {

constexpr const char* kHeadEntry = "recycle.head";
constexpr int kHeadFormat = 1;

}  // namespace

std::string head_identity_json(const HeadIdentity& h) {
  const CacheIdentity& id = h.identity;
  nlohmann::json j = {{"format", kHeadFormat},
                      {"from_cache", h.from_cache},
                      {"model", id.model},
                      {"fingerprint", id.fingerprint},
                      {"split_at", id.split_at},
                      {"prefix_blocks", id.prefix_blocks},
                      {"total_blocks", id.total_blocks},
                      {"class_names", h.class_names}};
  if (h.from_cache) {
    nlohmann::json cache = nlohmann::json::object();
    id.to_json(&cache);
    j["cache_identity"] = cache;
  }
  return j.dump();
}

HeadIdentity head_identity_from_json(const std::string& text, const std::string& path) {
  HeadIdentity h;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (json_int(j, "format") != kHeadFormat) {
      throw std::runtime_error("head file " + path + " has format " +
                               std::to_string(json_int(j, "format")) + ", this version reads " +
                               std::to_string(kHeadFormat));
    }
    h.from_cache = j.at("from_cache").get<bool>();
    if (h.from_cache) {
      const Status st = CacheIdentity::from_json(j.at("cache_identity"), &h.identity);
      if (!st.ok()) throw std::runtime_error("head file " + path + ": " + st.to_string());
    }
    h.identity.model = j.at("model").get<std::string>();
    h.identity.fingerprint = j.at("fingerprint").get<std::string>();
    h.identity.split_at = j.at("split_at").get<std::string>();
    h.identity.prefix_blocks = json_int(j, "prefix_blocks");
    h.identity.total_blocks = json_int(j, "total_blocks");
    h.class_names = j.at("class_names").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("head file " + path + " has a damaged identity: " + e.what());
  }
  return h;
}

HeadIdentity head_identity_of_cache(const Manifest& m) {
  HeadIdentity h;
  h.identity = m.identity();
  h.class_names = m.class_names;
  h.from_cache = true;
  return h;
}

HeadIdentity head_identity_of_model(const BlockModel& model, const SplitModel& split) {
  HeadIdentity h;
  set_prefix_identity(model, split, &h.identity);
  h.class_names = model.class_names;
  return h;
}

void save_head(BlockStack& head, const HeadIdentity& identity, const std::string& path,
               const std::function<void(TensorFile&)>& extra) {
  TensorFile file;
  add_module_state(*head, &file);
  file.metadata[kHeadEntry] = head_identity_json(identity);
  if (extra) extra(file);
  save_tensor_file(file, path);  // atomically: no partial file, even on SIGTERM
}

std::vector<std::string> head_differences(const HeadIdentity& head, const Manifest& cache) {
  // A head from raw data knows its prefix alone: the cache's other fields stand in for its.
  CacheIdentity trained = head.from_cache ? head.identity : cache.identity();
  if (!head.from_cache) {
    trained.model = head.identity.model;
    trained.fingerprint = head.identity.fingerprint;
    trained.split_at = head.identity.split_at;
    trained.prefix_blocks = head.identity.prefix_blocks;
    trained.total_blocks = head.identity.total_blocks;
  }
  std::vector<std::string> diffs = cache.identity().identity_differences(trained);
  for (std::string& d : diffs) {  // "the cache has X, this run asks for Y": the head is Y
    const std::string run = ", this run asks for ";
    const size_t at = d.find(run);
    if (at != std::string::npos) d.replace(at, run.size(), ", the head was trained for ");
  }
  if (head.class_names != cache.class_names) {
    diffs.push_back("classes: the cache has " + std::to_string(cache.class_names.size()) +
                    ", the head was trained on " + std::to_string(head.class_names.size()) +
                    (head.class_names.size() == cache.class_names.size() ? " other ones" : ""));
  }
  return diffs;
}

HeadFile::HeadFile(const std::string& path) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw std::runtime_error("head file " + path + " does not exist");
  }
  require_regular_file(path);
  parse(read_regular_file(path));
}

HeadFile HeadFile::of_bytes(const std::string& bytes, const std::string& path) {
  HeadFile h;
  h.path_ = path;
  h.parse(bytes);
  return h;
}

void HeadFile::parse(const std::string& bytes) {
  file_ = from_safetensors(bytes, "head file " + path_);
  const auto entry = file_.metadata.find(kHeadEntry);
  if (entry == file_.metadata.end()) {
    throw std::runtime_error(path_ +
                             " is not a head file with an identity (save it again with "
                             "recycle-train --save-head)");
  }
  identity_ = head_identity_from_json(entry->second, path_);
}

void HeadFile::load_into(BlockStack& head) {
  try {
    load_module_state(*head, file_, "head file " + path_);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (a head of " + identity_.identity.model +
                             " after " + identity_.identity.split_at + ")");
  }
}

}  // namespace recycle
