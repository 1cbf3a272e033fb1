// cache/open_existing.h: an existing cache opened to read it (or to add to it), its split checked.
#include "cache/open_existing.h"

#include <stdexcept>

#include "cache/store_options.h"

namespace recycle {

namespace {

std::unique_ptr<ActivationStore> open_existing(const std::string& dir, const StoreOptions& so,
                                               Manifest* manifest) {
  std::unique_ptr<ActivationStore> store;
  ActivationStore::open(dir, so, &store).throw_if_error();
  const Status have = store->read_manifest(manifest);
  if (have.is_not_found() && !store->other_writer().empty()) {
    throw std::runtime_error("cache " + dir + " is still being created: " + store->other_writer());
  }
  have.throw_if_error();
  return store;
}

}  // namespace

std::unique_ptr<ActivationStore> open_cache_for_read(const std::string& dir, Manifest* manifest,
                                                     size_t block_cache_bytes) {
  StoreOptions so;
  so.read_only = true;
  if (block_cache_bytes > 0) so.block_cache_bytes = block_cache_bytes;
  return open_existing(dir, so, manifest);
}

std::unique_ptr<ActivationStore> open_cache_to_add(const std::string& dir, Manifest* manifest) {
  StoreOptions so;
  so.create_if_missing = false;
  return open_existing(dir, so, manifest);
}

const SplitInfo& require_split(const ActivationStore& store, const Manifest& manifest,
                               const std::string& split, bool allow_partial,
                               const std::string& partial_option) {
  const std::string& dir = store.dir();
  const auto it = manifest.splits.find(split);
  if (it == manifest.splits.end()) {
    const std::string writer = store.other_writer();
    if (!writer.empty()) {
      throw std::runtime_error("cache " + dir + " has no split '" + split + "' yet: " + writer);
    }
    std::string have;
    for (const auto& [name, info] : manifest.splits) have += (have.empty() ? "" : ", ") + name;
    throw std::runtime_error("cache " + dir + " has no split '" + split +
                             "' (it has: " + (have.empty() ? "none" : have) + ")");
  }
  if (!it->second.complete && !allow_partial) {
    const std::string writer = store.other_writer();
    throw std::runtime_error("split '" + split + "' of cache " + dir + " is incomplete " +
                             (writer.empty() ? "(its build did not finish)" : "(" + writer + ")") +
                             ": finish the build, or pass " + partial_option);
  }
  return it->second;
}

}  // namespace recycle
