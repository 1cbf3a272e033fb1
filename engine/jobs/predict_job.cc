// run_predict: the job behind recycle-predict. The samples go through a build's inputs and
// encoder a chunk at a time (engine/precompute/split_inputs.h: the dataset streamed, read ahead
// by a ChunkReader, keyed by the cache's keyer; chunk_encoder.h), are looked up in the cache (one
// MultiGet of the chunk's distinct keys), the misses run the folded prefix (prefix_runner.h), and
// the head runs on the stored activations and the computed ones together. Memory: one chunk's
// images, records, activations and rows, plus what a build holds per sample (label, id).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "base/strings.h"
#include "cache/activation_store.h"
#include "cache/open_existing.h"
#include "cache/record.h"
#include "cache/split_writer.h"
#include "engine/data/data_source.h"  // parse_data_spec
#include "engine/jobs/head_file.h"
#include "engine/jobs/prediction_rows.h"
#include "engine/options/predict_output.h"  // output_target
#include "engine/models/encoder_registry.h"
#include "engine/models/model_setup.h"  // with_encoder_input
#include "engine/models/preprocess.h"  // kTokenIdsPreprocess
#include "engine/models/pt2_model.h"
#include "engine/models/transformer.h"
#include "engine/precompute/chunk_encoder.h"
#include "engine/precompute/prefix_identity.h"
#include "engine/precompute/prefix_runner.h"
#include "engine/precompute/split_inputs.h"
#include "engine/train/cache_levels.h"  // chained_fingerprint
#include "engine/util/atomic_file.h"
#include "engine/util/parallel_loop.h"
#include "engine/util/progress.h"
#include "recycle/errors.h"
#include "recycle/predict.h"

namespace recycle {

std::string PredictReport::to_json() const {
  nlohmann::json j = {{"out", out},
                      {"samples", samples},
                      {"hits", hits},
                      {"misses", misses},
                      {"written_back", written_back},
                      {"correct", correct},
                      {"seconds", seconds},
                      {"predict_seconds", predict_seconds},
                      {"prefix_seconds", prefix_seconds},
                      {"write_seconds", write_seconds},
                      {"samples_per_s", samples_per_s}};
  j["accuracy"] = accuracy >= 0 ? nlohmann::json(accuracy) : nlohmann::json(nullptr);
  if (full_seconds > 0) {
    j["full_seconds"] = full_seconds;
    j["full_head_seconds"] = full_head_seconds;
    j["agree"] = agree;
    j["max_prob_diff"] = max_prob_diff;
  }
  return j.dump();
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The cache, opened for reading, or for writing with --write-back (the writer's lock taken).
std::unique_ptr<ActivationStore> open_cache(const PredictOptions& o, Manifest* m) {
  if (o.write_back && ::access(o.cache_dir.c_str(), F_OK) == 0 &&
      ::access(o.cache_dir.c_str(), W_OK) != 0) {
    throw std::runtime_error("--write-back needs to write cache " + o.cache_dir + ": " +
                             std::strerror(errno) + " (leave --write-back out to read it only)");
  }
  return o.write_back ? open_cache_to_add(o.cache_dir, m) : open_cache_for_read(o.cache_dir, m);
}

// What the cache knows and the options left out: --classes, the list its splits were built with
// (" classes=5-9" in their data descriptions). --weights is always the user's: the file the
// manifest records is named in the refusal, never opened.
PredictOptions with_cache_defaults(const PredictOptions& given, const Manifest& m) {
  PredictOptions o = given;
  if (m.classifier == kClassifierNone) {  // no weights or head file of the engine's can fit it
    throw InvalidArgument("cache " + o.cache_dir + " was filled by a program's own prefix (" +
                          m.model + ", through recycle.build or CacheWriter), which " +
                          "recycle-predict cannot run for its misses: serve it from Python " +
                          "with recycle.CachedPrefix(path, prefix) and your head");
  }
  // A prefix loaded from a program file (torchscript:FILE, pt2:FILE) without weights: --model
  // gives it (check_fits compares its spec and fingerprint with the cache's).
  const bool program =
      m.weights_file.empty() && m.derived_blocks.empty() && loads_a_program(m.model);
  if (program && o.weights.empty() && o.model.empty()) {
    spec_with_given_file(m.model, "", "cache " + o.cache_dir);  // throws: give --model KIND:FILE
  }
  const bool file_model = program && !o.model.empty();
  if (o.weights.empty() && !file_model) {
    if (!m.derived_blocks.empty()) {
      throw InvalidArgument("--weights FILE is required: cache " + o.cache_dir +
                            " is a progressive level, derived from " + m.derived_from +
                            " by recycle-train --freeze; give the model that run saved "
                            "(--save-model FILE), with the head it saved (--save-head)");
    }
    if (m.weights_file.empty()) {
      throw InvalidArgument("--weights FILE is required: cache " + o.cache_dir +
                            " does not record the weights file it was built from (built from a "
                            "--model without --weights, or by an older recycle-build)");
    }
    // The path is the cache's to record, not to open: a cache is data (docs/predict.md).
    throw InvalidArgument("--weights FILE is required: cache " + o.cache_dir +
                          " records that it was built from --weights " + m.weights_file +
                          " (the tools open no file a cache names: give it, and it is checked "
                          "against the cache's fingerprint)");
  }
  if (o.data.classes.empty()) {
    for (const auto& [name, split] : m.splits) {
      if (split.classes.empty()) continue;
      o.data.classes = split.classes;
      break;
    }
  }
  return o;  // run_predict checks its output against these defaults too (output_target)
}

// The build options that load this cache's model and keyer over the samples to predict.
BuildOptions build_options_for(const PredictOptions& o, const Manifest& m) {
  BuildOptions b;
  b.data = o.data;
  b.model.weights = o.weights;
  b.model.encoder = o.model;
  b.split_at = m.split_at;
  b.keyer = m.keyer;
  b.codec = m.codec;
  b.cache_dir = o.cache_dir;
  b.batch = o.batch;
  b.threads = o.threads;
  b.progress = false;
  b.device = o.device;
  // The misses' prefix runs in the arithmetic the cache's records were made in.
  b.precision = prefix_precision_of(m, o.cache_dir);
  return b;
}

// Refuses weights, data or a head that do not belong to cache m, naming what differs.
// A progressive level's fingerprint chains through the split points it was derived along: the
// given weights are fingerprinted along the same chain (cache_levels.h).
void check_fits(const PredictOptions& o, const Manifest& m, ChunkEncoder& encoder,
                const Dataset& data, const HeadIdentity& head) {
  CacheIdentity given = encoder.requested().identity();
  if (!m.derived_blocks.empty()) {
    given.fingerprint = chained_fingerprint(encoder.prefix().model().model, m.derived_blocks);
  }
  const auto weights = m.identity().identity_differences(given);
  if (!weights.empty()) {
    throw StaleCacheError(mismatch_message(
        o.cache_dir, weights,
        "give the --weights and --data it was built from, or build a cache from these"));
  }
  if (data.class_names != m.class_names) {
    throw std::runtime_error("cache " + o.cache_dir + " holds other classes than this data " +
                             "(check --classes)");
  }
  const auto diffs = head_differences(head, m);
  if (!diffs.empty()) {
    throw StaleCacheError("head " + o.head + " was trained for another cache than " + o.cache_dir +
                          ": " + join(diffs, "; ") +
                          " (train one from this cache: recycle-train --cache " + o.cache_dir +
                          " --save-head FILE)");
  }
}

// The head of --head, its identity checked by `check` before its weights are loaded: a head file
// (recycle-train --save-head) into the split's head, or a compiled head (FILE.pt2, from
// recycle.export(head, ..., cache=DIR)) as it is.
BlockStack load_head(const std::string& path, ChunkEncoder& encoder,
                     const std::function<void(const HeadIdentity&)>& check) {
  if (is_pt2_path(path)) {
    std::string identity;
    BlockStack head = load_pt2_head(path, "--head", &identity);
    if (identity.empty()) {
      throw InvalidArgument("--head " + path + " records no cache it was trained from: export it "
                            "with recycle.export(head, example, path, cache=DIR)");
    }
    check(head_identity_from_json(identity, path));
    return head;
  }
  HeadFile file(path);
  check(file.identity());
  BlockStack head = encoder.prefix().model().split.head;
  file.load_into(head);
  return head;
}

// One chunk's lookup: its distinct keys, which hit (their records), which miss.
struct Lookup {
  std::vector<Key> distinct;
  std::vector<int64_t> slot;         // per sample of the chunk: its key's index in distinct
  std::vector<std::string> records;  // per distinct key: the stored record ("" on a miss)
  std::vector<int64_t> computed;     // per distinct key: its row in the misses' outputs, or -1
  std::vector<int64_t> first;        // per distinct key: its first sample's split position
  int64_t hit_samples = 0;
};

void look_up(const ActivationStore& store, const BuildChunk& c, const std::vector<Key>& keys,
             Lookup* l) {
  const size_t n = keys.size();
  l->distinct.clear();
  l->slot.assign(n, -1);
  l->first.clear();
  std::unordered_map<Key, int64_t, KeyHash> seen;
  for (size_t i = 0; i < n; ++i) {
    const auto [it, inserted] = seen.emplace(keys[i], static_cast<int64_t>(l->distinct.size()));
    if (inserted) {
      l->distinct.push_back(keys[i]);
      l->first.push_back(static_cast<int64_t>(c.begin + i));  // todo[p] is p
    }
    l->slot[i] = it->second;
  }
  l->records.assign(l->distinct.size(), std::string());
  std::vector<Status> found;
  store.multi_get(
      l->distinct, [&](size_t k, std::string_view bytes) { l->records[k].assign(bytes); }, &found);
  l->computed.assign(l->distinct.size(), -1);
  l->hit_samples = 0;
  int64_t misses = 0;
  for (size_t k = 0; k < l->distinct.size(); ++k) {
    if (found[k].is_not_found()) {
      l->computed[k] = misses++;
    } else {
      found[k].throw_if_error();
    }
  }
  for (size_t i = 0; i < n; ++i) l->hit_samples += l->computed[l->slot[i]] < 0 ? 1 : 0;
}

// The record of distinct key k of a hit, parsed and checked against the cache's layout.
void parse_hit(const Lookup& l, size_t k, const RecordLayout& layout, const std::string& dir,
               std::vector<RecordTensor>* tensors) {
  Status st = parse_record(l.records[k], tensors);
  if (st.ok()) st = check_record_layout(*tensors, layout);
  if (!st.ok()) {
    throw CorruptRecordError("corrupt cache " + dir + ": record " + l.distinct[k].to_hex() + ": " +
                             st.to_string());
  }
}

// The head's input for an image chunk: float32 [n, ...record shape], each row the decoded
// record of a hit or the prefix's output of a miss (`missed`: [misses, ...],
// ChunkEncoder::prefix_outputs' form).
torch::Tensor image_head_inputs(const Lookup& l, const torch::Tensor& missed, const Manifest& m,
                                const std::string& dir) {
  const int64_t n = static_cast<int64_t>(l.slot.size());
  const RecordLayout layout = m.layout();
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), m.record_shapes.at(0).begin(), m.record_shapes.at(0).end());
  torch::Tensor x = torch::empty(shape, torch::kFloat32);
  const int64_t per = n > 0 ? x.numel() / n : 0;
  float* base = x.data_ptr<float>();
  const float* computed = missed.defined() ? missed.data_ptr<float>() : nullptr;
  parallel_loop(n, [&](int64_t i) {
    const int64_t k = l.slot[i];
    float* row = base + i * per;
    if (l.computed[k] >= 0) {
      std::memcpy(row, computed + l.computed[k] * per, static_cast<size_t>(per) * sizeof(float));
      return;
    }
    std::vector<RecordTensor> tensors;
    parse_hit(l, static_cast<size_t>(k), layout, dir, &tensors);
    decode_tensor(tensors[0], row);
  });
  return x;
}

// The head's input for a text chunk: packed text features float32 [n, L, D + 1]
// (engine/models/transformer.h), L the chunk's longest text; a hit's hidden states decoded from
// its record (text_record_layout), a miss's copied from the prefix's packed outputs `missed`
// ([misses, L', D + 1]). Padding never changes a text's output, so a text gives the same
// prediction in any chunk.
torch::Tensor text_head_inputs(const Lookup& l, const torch::Tensor& missed, const Manifest& m,
                               const std::string& dir) {
  const int64_t n = static_cast<int64_t>(l.slot.size());
  const int64_t d = m.record_shapes.at(0).at(1);
  const RecordLayout layout = m.layout();
  const size_t keys = l.distinct.size();
  std::vector<std::vector<RecordTensor>> hits(keys);  // per distinct key of a hit: its tensors
  std::vector<int64_t> lengths(keys, 0);              // per distinct key: its text's tokens
  torch::Tensor computed;                             // the misses' packed outputs
  if (missed.defined()) {
    computed = missed.contiguous();
    const torch::Tensor valid = computed.select(2, d).sum(1).round().to(torch::kInt64).contiguous();
    for (size_t k = 0; k < keys; ++k) {
      if (l.computed[k] < 0) continue;
      lengths[k] = valid.data_ptr<int64_t>()[l.computed[k]];
      if (lengths[k] < 1 || lengths[k] > computed.size(1)) {
        throw std::logic_error("the text prefix's output has a mask of " +
                               std::to_string(lengths[k]) + " valid positions of " +
                               std::to_string(computed.size(1)));
      }
    }
  }
  parallel_loop(static_cast<int64_t>(keys), [&](int64_t k) {
    if (l.computed[k] >= 0) return;
    parse_hit(l, static_cast<size_t>(k), layout, dir, &hits[k]);
    decode_exact(hits[k][1], &lengths[k]);
    if (lengths[k] < 1 || lengths[k] != hits[k][0].shape.at(0)) {
      throw CorruptRecordError("corrupt cache " + dir + ": record " + l.distinct[k].to_hex() +
                               ": length " + std::to_string(lengths[k]) + " for " +
                               std::to_string(hits[k][0].shape.at(0)) + " hidden states");
    }
  });
  const int64_t longest = std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  torch::Tensor hidden = torch::zeros({n, longest, d}, torch::kFloat32);
  torch::Tensor sample_lengths = torch::empty({n}, torch::kInt64);
  float* base = hidden.data_ptr<float>();
  int64_t* len = sample_lengths.data_ptr<int64_t>();
  const int64_t missed_length = computed.defined() ? computed.size(1) : 0;
  parallel_loop(n, [&](int64_t i) {
    const int64_t k = l.slot[i];
    float* row = base + i * longest * d;
    len[i] = lengths[k];
    if (l.computed[k] < 0) {
      decode_tensor(hits[k][0], row);  // [length, D]: the row's first positions
      return;
    }
    const float* from = computed.data_ptr<float>() + l.computed[k] * missed_length * (d + 1);
    for (int64_t j = 0; j < lengths[k]; ++j) {
      std::memcpy(row + j * d, from + j * (d + 1), static_cast<size_t>(d) * sizeof(float));
    }
  });
  return pack_text_features(hidden, mask_from_lengths(sample_lengths, longest));
}

// The head's input for the chunk, hits and misses together.
torch::Tensor head_inputs(const Lookup& l, const torch::Tensor& missed, const Manifest& m,
                          const std::string& dir, bool text) {
  // Every sample a miss of its own: the prefix's outputs are the batch, in order.
  if (missed.defined() && missed.size(0) == static_cast<int64_t>(l.slot.size())) return missed;
  return text ? text_head_inputs(l, missed, m, dir) : image_head_inputs(l, missed, m, dir);
}

// --write-back: the misses' records (encoded in chunk order of their keys) and the manifest's
// counts in one write (records only: no split's index changes).
int64_t write_back(ChunkEncoder& encoder, SplitWriter& writer, const Lookup& l,
                   const torch::Tensor& missed, BuildChunk* c) {
  encoder.encode(missed, c);
  StagedWrite w = writer.stage();
  for (size_t k = 0; k < l.distinct.size(); ++k) {
    if (l.computed[k] >= 0) w.put_record(l.distinct[k], c->records[l.computed[k]]);
  }
  writer.seal(&w);
  writer.write(&w);
  c->records.clear();
  return w.records;
}

}  // namespace

namespace {

// What a run of recycle-predict holds while it goes through its chunks (run_predict).
struct PredictRun {
  const PredictOptions& o;
  const Manifest& m;
  const ActivationStore& store;
  SplitInputs& inputs;
  ChunkEncoder& encoder;
  BlockStack head;
  torch::Device device;
  RowWriter& rows;
  SplitWriter* back;  // --write-back's writer, or null
  PredictReport& report;
  std::vector<int64_t> todo;  // every sample, in order
  std::vector<Key> keys;      // the chunk's samples' keys
  Lookup l;
  double full_prefix_seconds = 0;  // --compare-full's prefix time, not the prediction's

  // The full model on every sample of chunk c (--compare-full): its probabilities, its time
  // counted apart (read_seconds: the chunk's read, which the full model needs too).
  torch::Tensor full_probs(const BuildChunk& c, double read_seconds) {
    const auto t = Clock::now();
    BuildChunk all = c;
    all.compute_pos.assign(todo.begin() + c.begin, todo.begin() + c.end);
    all.compute_keys = keys;
    const double prefix_before = encoder.prefix_seconds();
    const torch::Tensor features = encoder.prefix_outputs(encoder.inputs(all));
    full_prefix_seconds += encoder.prefix_seconds() - prefix_before;
    const auto h = Clock::now();
    torch::Tensor probs = torch::softmax(head->forward(features.to(device)), 1).to(torch::kCPU);
    report.full_head_seconds += since(h);
    report.full_seconds += since(t) + read_seconds;
    return probs;
  }

  // Chunk c's hits from the cache, its misses through the prefix (written back with
  // --write-back), and the head on both: the probabilities, counted in the report.
  torch::Tensor predict(BuildChunk* c) {
    look_up(store, *c, keys, &l);
    c->compute_pos.clear();
    c->compute_keys.clear();
    for (size_t k = 0; k < l.distinct.size(); ++k) {
      if (l.computed[k] < 0) continue;
      c->compute_pos.push_back(l.first[k]);
      c->compute_keys.push_back(l.distinct[k]);
    }
    torch::Tensor missed;
    if (!c->compute_pos.empty()) {
      missed = encoder.prefix_outputs(encoder.inputs(*c));
      if (back) report.written_back += write_back(encoder, *back, l, missed, c);
    }
    const torch::Tensor x = head_inputs(l, missed, m, o.cache_dir, inputs.data().is_text);
    torch::Tensor probs = torch::softmax(head->forward(x.to(device)), 1).to(torch::kCPU);
    if (probs.dim() != 2 || probs.size(1) != static_cast<int64_t>(m.class_names.size())) {
      throw std::runtime_error("head " + o.head + " gives " + c10::str(probs.sizes()) + " for " +
                               std::to_string(x.size(0)) + " samples; the cache has " +
                               std::to_string(m.class_names.size()) + " classes");
    }
    return probs.contiguous();
  }

  // Chunk c (the index-th): read, keyed, predicted, its rows written; with --compare-full the
  // full model too, first in even chunks and second in odd ones, so neither side has the warmer
  // caches throughout.
  void chunk(BuildChunk* c, ChunkReader& reader, int64_t index) {
    const auto read_start = Clock::now();
    reader.read(c);
    const double read_seconds = since(read_start);
    const int64_t n = static_cast<int64_t>(c->end - c->begin);
    const auto key_start = Clock::now();  // keyed before --compare-full, which checks the keys
    inputs.key_samples(*c, todo.data() + c->begin, n, &keys);
    const double key_seconds = since(key_start);
    torch::Tensor full;
    if (o.compare_full && index % 2 == 0) full = full_probs(*c, read_seconds);
    const auto t = Clock::now();
    const torch::Tensor probs = predict(c);
    const torch::Tensor pred = probs.argmax(1);
    const int64_t* p = pred.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      report.correct += p[i] == inputs.data().labels[todo[c->begin + i]] ? 1 : 0;
    }
    report.predict_seconds += since(t) + read_seconds + key_seconds;
    const auto w = Clock::now();
    rows.write(c->begin, inputs.data(), probs, pred, l.slot, l.computed);
    report.write_seconds += since(w);
    report.hits += l.hit_samples;
    report.misses += n - l.hit_samples;
    if (!o.compare_full) return;
    if (index % 2 == 1) full = full_probs(*c, read_seconds);
    report.agree += full.argmax(1).eq(pred).sum().item<int64_t>();
    report.max_prob_diff =
        std::max(report.max_prob_diff, (full - probs).abs().max().item<double>());
  }
};

}  // namespace

PredictReport run_predict(const PredictOptions& given) {
  const auto start = Clock::now();
  given.validate();
  PredictReport report;
  report.out = given.out;
  Manifest m;
  std::unique_ptr<ActivationStore> store = open_cache(given, &m);
  const PredictOptions o = with_cache_defaults(given, m);
  if (m.preprocess == kTokenIdsPreprocess) {
    throw std::invalid_argument("cache " + given.cache_dir + " holds the hidden states of token "
                                "ids (a pt2 text prefix's): recycle-predict does not serve them "
                                "yet; run its head in Python (docs/pytorch2.md)");
  }
  // The output before any work: a directory it cannot be written in fails first. Rows go to a
  // temporary file that replaces o.out only when every row is written.
  AtomicFile out_file(output_target(o));
  std::ofstream out(out_file.temp_path(), std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + o.out + ": " + std::strerror(errno));
  const BuildOptions bo = build_options_for(o, m);
  bo.validate();
  set_thread_count(bo.threads);
  SplitInputs inputs(with_encoder_input(bo.data, bo.model), bo.keyer, "", 0);
  ChunkEncoder encoder(inputs, bo);
  BlockStack head = load_head(o.head, encoder, [&](const HeadIdentity& identity) {
    check_fits(o, m, encoder, inputs.data(), identity);
  });
  head->eval();

  const int64_t n = static_cast<int64_t>(inputs.data().size());
  RowWriter rows(out, output_format(o.out), m.class_names, o.top_k);
  // --write-back's writes: records and the manifest's counts (a writer of no split: the index
  // of no split changes), flushed at the end.
  std::unique_ptr<SplitWriter> back;
  if (o.write_back) back = std::make_unique<SplitWriter>(store.get(), &m, "");
  PredictRun run{o,    m,          *store, inputs, encoder, head, encoder.prefix().device(),
                 rows, back.get(), report, {},     {},      {}};
  run.todo.resize(static_cast<size_t>(n));
  std::iota(run.todo.begin(), run.todo.end(), int64_t{0});
  const size_t chunk_size = static_cast<size_t>(bo.batch);
  Progress progress("predict", n, o.progress);
  ChunkReader reader(inputs, run.todo, 0, chunk_size);
  torch::NoGradGuard no_grad;
  int64_t index = 0;
  for (size_t begin = 0; begin < run.todo.size(); begin += chunk_size, ++index) {
    BuildChunk c;
    c.begin = begin;
    c.end = std::min(run.todo.size(), begin + chunk_size);
    run.chunk(&c, reader, index);
    progress.advance(static_cast<int64_t>(c.end - c.begin));
  }
  progress.finish();
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + o.out + ": " + std::strerror(errno));
  out.close();
  out_file.commit();
  if (back && report.written_back > 0) back->finish();

  report.samples = n;
  report.accuracy = n > 0 ? static_cast<double>(report.correct) / n : -1;
  report.prefix_seconds = encoder.prefix_seconds() - run.full_prefix_seconds;
  const double loop = report.predict_seconds + report.write_seconds;
  report.samples_per_s = loop > 0 ? n / loop : 0;
  report.seconds = since(start);
  return report;
}

std::string head_identity_of_cache_dir(const std::string& cache_dir) {
  Manifest m;
  open_cache_for_read(cache_dir, &m);
  return head_identity_json(head_identity_of_cache(m));
}

}  // namespace recycle
