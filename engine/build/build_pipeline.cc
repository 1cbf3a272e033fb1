#include "engine/build/build_pipeline.h"

#include <omp.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>

#include "cache/activation_store.h"
#include "cache/record.h"
#include "engine/build/prefix_identity.h"
#include "engine/models/block_model.h"
#include "engine/models/model_setup.h"
#include "engine/models/preprocess.h"
#include "engine/models/weights_io.h"
#include "engine/util/progress.h"
#include "keyers/keyer_registry.h"

namespace recycle {

std::string BuildReport::to_json() const {
  nlohmann::json j = {{"cache", cache_dir},       {"split", split},
                      {"samples", samples},       {"unique", unique},
                      {"computed", computed},     {"skipped", skipped},
                      {"index_written", index_written},
                      {"bytes", bytes},           {"records", records},
                      {"seconds", seconds},       {"samples_per_s", samples_per_s}};
  return j.dump();
}

namespace {

// Keys of every sample, computed in parallel. Exceptions are caught inside the OpenMP region
// and rethrown after it.
std::vector<Key> compute_keys(const Dataset& data, const Keyer& keyer) {
  std::vector<Key> keys(data.size());
  std::exception_ptr error;
  const int64_t n = static_cast<int64_t>(data.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    try {
      TensorView view;
      keys[i] = keyer.key(data.key_input(static_cast<size_t>(i), &view));
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return keys;
}

// The manifest this run asks for: identity plus record shapes.
Manifest requested_manifest(PreparedModel& pm, const std::string& keyer_spec,
                            Codec codec, const Dataset& data, const torch::Device& device) {
  Manifest m;
  set_prefix_identity(pm.model, pm.split, &m);
  m.keyer = keyer_spec;
  m.codec = codec_name(codec);
  m.preprocess = preprocess_spec();
  m.input_shape = data.item_shape;
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape = {1};
  shape.insert(shape.end(), data.item_shape.begin(), data.item_shape.end());
  torch::Tensor probe = pm.split.prefix->forward(torch::zeros(shape, device));
  m.record_shapes = {probe.sizes().slice(1).vec()};
  m.class_names = data.class_names;
  m.classifier = pm.classifier_is_new ? "new" : "pretrained";
  return m;
}

// Stops the build cleanly while the cache's filesystem still has room: RocksDB needs headroom
// to flush its memtables (up to ~96 MB here), and Debian's RocksDB aborts on an assertion
// rather than returning an error when a write fails for lack of space.
constexpr uint64_t kFreeSpaceReserve = 96ull << 20;

void check_free_space(const std::string& dir, uint64_t batch_bytes) {
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (ec) return;  // cannot tell; RocksDB will report real errors
  const uint64_t need = kFreeSpaceReserve + 2 * batch_bytes;
  if (space.available < need) {
    throw std::runtime_error("not enough free space for cache " + dir + ": " +
                             std::to_string(space.available >> 20) + " MB free, the build stops "
                             "below " + std::to_string(need >> 20) +
                             " MB (what it wrote so far is kept; rerun to resume)");
  }
}

}  // namespace

BuildReport run_build(const BuildOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.batch < 1) throw std::invalid_argument("--batch must be at least 1");
  if (o.cache_dir.empty()) throw std::invalid_argument("--cache DIR is required");
  Codec codec;
  if (!parse_codec(o.codec, &codec)) {
    throw std::invalid_argument("unknown codec '" + o.codec + "' (fp32, fp16, bf16)");
  }
  ActivationStore::check_split_name(o.data.split).throw_if_error();
  set_thread_count(o.threads);
  const torch::Device device(o.device);

  const Dataset data = load_dataset(o.data);
  if (data.is_text) {
    throw std::runtime_error("text data needs a text model, which this version does not have yet");
  }
  const std::string keyer_spec = o.keyer.empty() ? "xxh3" : o.keyer;
  const std::unique_ptr<Keyer> keyer = make_keyer(keyer_spec);

  PreparedModel pm = prepare_model(o.model, data, o.recycle, o.split_at, device);
  if (pm.split.prefix_blocks == 0) {
    throw std::invalid_argument(
        "--recycle 0 caches nothing; train without a cache with recycle-train --recycle 0");
  }
  Manifest manifest = requested_manifest(pm, keyer->spec(), codec, data, device);

  if (o.rebuild) ActivationStore::destroy(o.cache_dir).throw_if_error();
  std::unique_ptr<ActivationStore> store;
  ActivationStore::open(o.cache_dir, StoreOptions(), &store).throw_if_error();

  ActivationStore::Batch first(*store);
  Manifest stored;
  const Status have = store->read_manifest(&stored);
  if (have.ok()) {
    const auto diffs = stored.identity_differences(manifest);
    if (!diffs.empty()) {
      throw std::runtime_error(mismatch_message(o.cache_dir, diffs, "use --rebuild to start over"));
    }
    if (stored.class_names != manifest.class_names) {
      throw std::runtime_error("cache " + o.cache_dir +
                               " holds other classes than this data (check --classes)");
    }
    // Caches made before the input shape was stored are checked by their record shapes.
    if (stored.record_shapes != manifest.record_shapes) {
      throw std::runtime_error("cache " + o.cache_dir + " stores records of shape " +
                               (stored.record_shapes.size() == 1
                                    ? shape_string(stored.record_shapes[0])
                                    : std::to_string(stored.record_shapes.size()) + " tensors") +
                               ", this prefix makes " +
                               shape_string(manifest.record_shapes.at(0)) + " from inputs of " +
                               shape_string(manifest.input_shape) + " (use --rebuild to start over)");
    }
    if (stored.input_shape.empty()) stored.input_shape = manifest.input_shape;
    manifest = stored;
  } else if (have.is_not_found()) {
    first.put_blob("head", module_to_bytes(*pm.split.head));
  } else {
    have.throw_if_error();
  }

  const std::string& split = o.data.split;
  std::vector<IndexEntry> existing;
  store->read_index(split, &existing).throw_if_error();
  const std::vector<Key> keys = compute_keys(data, *keyer);
  const int64_t n = static_cast<int64_t>(data.size());

  // Positions whose index entry must be written: new, or different from what is stored.
  std::vector<int64_t> todo;
  for (int64_t i = 0; i < n; ++i) {
    const IndexEntry want{keys[i], data.labels[i]};
    if (i >= static_cast<int64_t>(existing.size()) || !(existing[i] == want)) todo.push_back(i);
  }
  std::unordered_set<Key, KeyHash> distinct(keys.begin(), keys.end());

  BuildReport report;
  report.cache_dir = o.cache_dir;
  report.split = split;
  report.samples = n;
  report.unique = static_cast<int64_t>(distinct.size());

  const auto it = manifest.splits.find(split);
  const bool unchanged = todo.empty() && static_cast<int64_t>(existing.size()) == n &&
                         it != manifest.splits.end() && it->second.complete &&
                         it->second.data == data.description;
  if (!unchanged) {
    // Keys known to have a record: everything the stored index points to.
    std::unordered_set<Key, KeyHash> present;
    for (const IndexEntry& e : existing) present.insert(e.key);

    SplitInfo& info = manifest.splits[split];
    info.data = data.description;
    info.samples = n;
    info.unique = report.unique;
    info.complete = false;
    first.put_manifest(manifest);
    if (static_cast<int64_t>(existing.size()) > n) first.truncate_index(split, n);
    store->write(&first).throw_if_error();

    Progress progress("build " + split, static_cast<int64_t>(todo.size()), o.progress);
    const int64_t per_sample = [&] {
      int64_t v = 1;
      for (int64_t d : manifest.record_shapes[0]) v *= d;
      return v;
    }();
    torch::NoGradGuard no_grad;
    for (size_t begin = 0; begin < todo.size(); begin += static_cast<size_t>(o.batch)) {
      const size_t end = std::min(todo.size(), begin + static_cast<size_t>(o.batch));
      // Distinct keys of this chunk that are not known to be stored yet.
      std::vector<Key> unknown;
      std::vector<int64_t> unknown_pos;
      std::unordered_set<Key, KeyHash> in_chunk;
      for (size_t t = begin; t < end; ++t) {
        const Key& k = keys[todo[t]];
        if (!present.count(k) && in_chunk.insert(k).second) {
          unknown.push_back(k);
          unknown_pos.push_back(todo[t]);
        }
      }
      std::vector<Status> found;
      store->multi_get(unknown, [](size_t, std::string_view) {}, &found);
      std::vector<int64_t> compute_pos;
      std::vector<Key> new_keys;
      for (size_t u = 0; u < unknown.size(); ++u) {
        if (found[u].ok()) {
          present.insert(unknown[u]);
        } else if (found[u].is_not_found()) {
          compute_pos.push_back(unknown_pos[u]);
          new_keys.push_back(unknown[u]);
        } else {
          found[u].throw_if_error();
        }
      }

      ActivationStore::Batch batch(*store);
      if (!compute_pos.empty()) {
        const int64_t m = static_cast<int64_t>(compute_pos.size());
        torch::Tensor out = pm.split.prefix->forward(image_batch(data, compute_pos.data(), m, device))
                                .to(torch::kCPU, torch::kFloat32)
                                .contiguous();
        // Records are cut from this buffer by the manifest's shape: check it every time.
        if (out.dim() < 1 || out.size(0) != m ||
            out.sizes().slice(1).vec() != manifest.record_shapes[0]) {
          throw std::runtime_error("the prefix made outputs of shape " +
                                   shape_string(out.sizes().vec()) + ", the cache's records are " +
                                   shape_string(manifest.record_shapes[0]) + " per sample");
        }
        const float* base = out.data_ptr<float>();
        std::vector<std::string> records(m);
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < m; ++r) {
          records[r] = encode_record(codec, {FloatArrayRef{base + r * per_sample,
                                                           manifest.record_shapes[0]}});
        }
        for (int64_t r = 0; r < m; ++r) {
          batch.put_record(new_keys[r], records[r]);
          present.insert(new_keys[r]);
        }
        report.computed += m;
        report.bytes += static_cast<int64_t>(batch.record_bytes());
        manifest.records += m;
        manifest.record_bytes += static_cast<int64_t>(batch.record_bytes());
      }
      for (size_t t = begin; t < end; ++t) {
        batch.put_index(split, todo[t], IndexEntry{keys[todo[t]], data.labels[todo[t]]});
      }
      report.index_written += static_cast<int64_t>(end - begin);
      batch.put_manifest(manifest);  // counts stay consistent with the data after a crash
      check_free_space(o.cache_dir, batch.record_bytes());
      store->write(&batch).throw_if_error();
      progress.advance(static_cast<int64_t>(end - begin));
    }
    progress.finish();

    manifest.splits[split].complete = true;
    ActivationStore::Batch last(*store);
    last.put_manifest(manifest);
    store->write(&last, /*sync=*/true).throw_if_error();
    store->flush().throw_if_error();
  }

  report.records = manifest.records;
  report.skipped = report.samples - report.computed;
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.samples_per_s = report.seconds > 0 ? report.samples / report.seconds : 0.0;
  return report;
}

}  // namespace recycle
