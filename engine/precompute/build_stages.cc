// SplitBuild (build_stages.h): the coordinator of a split's build.
#include "engine/precompute/build_stages.h"

#include <algorithm>
#include <future>
#include <stdexcept>
#include <unordered_set>

#include "base/seconds.h"
#include "base/strings.h"
#include "cache/shard_rule.h"
#include "engine/models/model_setup.h"  // with_encoder_input
#include "engine/precompute/cache_input.h"
#include "engine/precompute/chunk_encoder.h"
#include "engine/precompute/prefix_runner.h"
#include "engine/precompute/split_inputs.h"
#include "engine/util/parallel_loop.h"
#include "engine/util/progress.h"
#include "recycle/build.h"  // sharded_key_positions
#include "recycle/errors.h"

namespace recycle {

ChunkWriter::~ChunkWriter() {
  if (pending_.valid()) pending_.wait();
}

void ChunkWriter::submit(StagedWrite w) {
  finish();
  current_ = std::move(w);
  pending_ = std::async(std::launch::async, [this] {
    const auto start = std::chrono::steady_clock::now();
    writer_.write(&current_);
    write_seconds_ += seconds_since(start);
    if (progress_) progress_->advance(current_.entries);
  });
}

void ChunkWriter::finish() {
  if (!pending_.valid()) return;
  pending_.get();  // rethrows the write's error
  current_ = StagedWrite();
}

RecordLayout text_record_layout(int64_t d_model, Codec codec) {
  return {TensorLayout{"hidden", Dtype::kFloat32, {kVariableDim, d_model}, codec},
          TensorLayout{"length", Dtype::kInt64, {}}};
}

RecordLayout token_record_layout(int64_t hidden, Codec codec) {
  return {TensorLayout{"hidden", Dtype::kFloat32, {kVariableDim, hidden}, codec},
          TensorLayout{"mask", Dtype::kInt64, {kVariableDim}}};
}

SplitBuild::SplitBuild(BuildOptions options, std::unique_ptr<SplitInputs> inputs,
                       std::unique_ptr<ChunkEncoder> encoder)
    : options_(std::move(options)),
      start_(std::chrono::steady_clock::now()),
      inputs_(std::move(inputs)),
      encoder_(std::move(encoder)),
      progress_label_("build " + options_.data.split) {
  check_options();
}

SplitBuild::SplitBuild(BuildOptions options)
    : options_(std::move(options)), start_(std::chrono::steady_clock::now()) {
  check_options();
  const BuildOptions& o = options_;
  inputs_ = std::make_unique<SplitInputs>(with_encoder_input(o.data, o.model), o.keyer, o.augment,
                                          o.views);
  encoder_ = std::make_unique<ChunkEncoder>(*inputs_, o);
  progress_label_ = "build " + o.data.split;
}

SplitBuild::SplitBuild(BuildOptions options, CacheBuildInputs in)
    : options_(std::move(options)), start_(std::chrono::steady_clock::now()) {
  const BuildOptions& o = options_;
  if (o.batch < 1) throw std::invalid_argument("--batch must be at least 1");
  if (o.cache_dir.empty()) throw std::invalid_argument("--cache DIR is required");
  ActivationStore::check_split_name(o.data.split).throw_if_error();
  inputs_ = std::make_unique<SplitInputs>(in.input->index(), std::move(in.data),
                                          std::move(in.classes), in.manifest.class_names);
  progress_label_ = "derive " + o.data.split + " at " + in.manifest.split_at;
  encoder_ = std::make_unique<ChunkEncoder>(*inputs_, o, std::move(in));
}

SplitBuild::~SplitBuild() = default;

void SplitBuild::check_options() {
  options_.validate();
  ActivationStore::check_split_name(options_.data.split).throw_if_error();
  set_thread_count(options_.threads);
}

size_t SplitBuild::chunk_size() const { return inputs_->chunk_size(options_.batch); }

WritableSplit& SplitBuild::split() {
  if (!write_) throw std::logic_error("SplitBuild::split: the cache is not open");
  return write_->split();
}

void SplitBuild::compute(BuildChunk* chunk) { encoder_->compute(chunk); }
const Manifest& SplitBuild::requested() const { return encoder_->requested(); }
const Dataset& SplitBuild::data() const { return inputs_->data(); }
std::string SplitBuild::augment() const { return inputs_->augment().spec(); }
int64_t SplitBuild::views() const { return inputs_->views(); }
std::string SplitBuild::staging_dir() { return split().staging_dir(); }
int64_t SplitBuild::writes() { return split().writer().writes(); }

namespace {

// The spot checks' keys (`spot`: samples of other parts keyed here) against the keys their ranks
// sent (`whole`): std::runtime_error naming the first sample whose content differs. A file
// skipped on either side is not compared.
void check_spot_keys(const SampleKeys& spot, const SampleKeys& whole, int parts,
                     const Dataset& data) {
  auto skipped = [](const SampleKeys& k, int64_t p) {
    return std::any_of(k.skipped.begin(), k.skipped.end(),
                       [p](const auto& s) { return s.first == p; });
  };
  for (size_t i = 0; i < spot.positions.size(); ++i) {
    const int64_t p = spot.positions[i];
    if (spot.keys[i] == whole.keys.at(static_cast<size_t>(p)) || skipped(spot, p) ||
        skipped(whole, p)) {
      continue;
    }
    throw std::runtime_error("sample " + data.ids.at(static_cast<size_t>(p)) + " of " +
                             data.description + " is not the same on rank " +
                             std::to_string(p % parts) + " as here (its content key differs): " +
                             "every rank needs the same data, model, weights and options");
  }
}

}  // namespace

void SplitBuild::key_samples() { use_keys(inputs_->key_all()); }

void SplitBuild::key_samples(int part, int parts,
                             const std::function<SampleKeys(SampleKeys, int64_t)>& gather) {
  const int64_t samples = static_cast<int64_t>(inputs_->data().size());
  // This part's samples, and spot checks of the others': keyed here too, and compared with the
  // keys their ranks send, so that ranks whose files differ are refused (a difference in a file
  // no spot check reads is not seen).
  SampleKeys keyed = inputs_->key_positions(sharded_key_positions(samples, part, parts));
  SampleKeys own, spot;
  for (size_t i = 0; i < keyed.positions.size(); ++i) {
    SampleKeys& to = keyed.positions[i] % parts == part ? own : spot;
    to.positions.push_back(keyed.positions[i]);
    to.keys.push_back(keyed.keys[i]);
  }
  for (auto& s : keyed.skipped) {
    (s.first % parts == part ? own : spot).skipped.push_back(std::move(s));
  }
  SampleKeys whole = gather(std::move(own), samples);
  check_spot_keys(spot, whole, parts, inputs_->data());
  use_keys(inputs_->settle_keys(std::move(whole)));
}

void SplitBuild::use_keys(std::vector<Key> keys) {
  const std::unordered_set<Key, KeyHash> distinct(keys.begin(), keys.end());
  report_.cache_dir = options_.cache_dir;
  report_.split = options_.data.split;
  report_.samples = static_cast<int64_t>(keys.size());
  report_.unique = static_cast<int64_t>(distinct.size());
  report_.files_left_out = inputs_->files_left_out();
  plan_.set_views(inputs_->augment().spec(), inputs_->views());
  plan_.set_keys(std::move(keys));
}

StoredChecks SplitBuild::stored_checks() {
  StoredChecks c;
  c.before = [this](const Manifest& stored) {
    const std::string& dir = options_.cache_dir;
    const Manifest& wanted = encoder_->requested();
    if (stored.fingerprint != wanted.fingerprint && !stored.weights_file.empty() &&
        options_.model.weights.empty() && !inputs_->from_cache() &&
        !stored.identity().identity_differences(wanted.identity()).empty()) {
      // A missing option, not another setup: --rebuild would replace the records with those of
      // a prefix initialised at random.
      throw StaleCacheError("cache " + dir + " was built from --weights " + stored.weights_file +
                            ", and this run gives no --weights (its prefix would be initialised "
                            "at random): give --weights FILE");
    }
  };
  c.after = [this](Manifest* stored) {
    const std::string& dir = options_.cache_dir;
    const Manifest& wanted = encoder_->requested();
    if (stored->class_names != wanted.class_names) {
      // The cache's classes are the first split's (build the training split first); a split may
      // hold fewer (a test split with no example of one): its labels take the cache's ids.
      inputs_->adopt_class_names(stored->class_names, options_.data.split, "cache " + dir);
    }
    // Caches made before the input shape was stored are checked by their record shapes.
    if (stored->record_shapes != wanted.record_shapes) {
      const auto& shapes = stored->record_shapes;
      throw std::runtime_error("cache " + dir + " stores records of shape " +
                               (shapes.size() == 1 ? shape_string(shapes[0])
                                                   : std::to_string(shapes.size()) + " tensors") +
                               ", this prefix makes " + shape_string(wanted.record_shapes.at(0)) +
                               " from inputs of " + shape_string(wanted.input_shape) +
                               " (use --rebuild to start over)");
    }
    if (!wanted.weights_file.empty()) stored->weights_file = wanted.weights_file;  // same print
  };
  return c;
}

void SplitBuild::keep_shard() {
  const std::vector<Key>& keys = plan_.keys();
  split_samples_ = static_cast<int64_t>(keys.size());
  std::vector<int64_t> keep = rows_of_shard(keys, options_.shard);
  std::vector<Key> kept = rows_at(keys, keep);
  inputs_->keep_only(keep);
  report_.samples = static_cast<int64_t>(kept.size());
  report_.unique =
      static_cast<int64_t>(std::unordered_set<Key, KeyHash>(kept.begin(), kept.end()).size());
  plan_.set_keys(std::move(kept));
}

SplitShard SplitBuild::shard() const { return split_shard(options_.shard, split_samples_); }

void SplitBuild::open() {
  if (!plan_.keyed()) key_samples();
  if (options_.shard.sharded() && split_samples_ == 0) keep_shard();
  SplitRequest r;
  r.where = {options_.cache_dir, options_.data.split, options_.compression, options_.rebuild};
  r.wanted = encoder_->requested();
  r.head = [this] { return encoder_->prefix().head_bytes(); };
  r.shard = shard();
  r.augment = inputs_->augment().spec();
  r.views = inputs_->views();
  r.start_over = "use --rebuild to start over";
  r.elsewhere = "use another --cache, or --rebuild to start over";
  auto write = std::make_unique<SplitTransaction>(std::move(r), stored_checks(), start_);
  WritableSplit& split = write->split();
  encoder_->set_record_shape(split.manifest().record_shapes.at(0));
  const Dataset& data = inputs_->data();
  plan_.set_damaged(split.damaged());
  plan_.plan(split.take_index(), data.labels, split.complete_for(data.description, report_.samples),
             split.had_records());
  write_ = std::move(write);
}

void SplitBuild::begin() {
  SplitInfo info;
  info.data = inputs_->data().description;
  info.classes = inputs_->data().classes;
  info.samples = report_.samples;
  info.unique = report_.unique;
  write_->begin(info);
  progress_ = std::make_unique<Progress>(progress_label_, static_cast<int64_t>(plan_.todo().size()),
                                         options_.progress);
}

bool SplitBuild::next_chunk(BuildChunk* chunk) {
  *chunk = BuildChunk();
  if (!plan_.next_chunk(chunk_size(), &chunk->begin, &chunk->end)) return false;
  plan_.find_missing(chunk->begin, chunk->end, split().store(), &chunk->compute_pos,
                     &chunk->compute_keys, &chunk->compute_views);
  return true;
}

StagedWrite SplitBuild::stage_write(BuildChunk* chunk) {
  const std::vector<int64_t>& labels = inputs_->data().labels;
  return write_->stage(plan_, chunk->begin, chunk->end, chunk->compute_keys, &chunk->records,
                       [&](int64_t pos) {
                         return IndexEntry{plan_.keys()[pos], labels[pos]};
                       });
}

void SplitBuild::write_chunk(BuildChunk* chunk) {
  StagedWrite w = stage_write(chunk);
  split().writer().write(&w);
  if (progress_) progress_->advance(w.entries);
}

void SplitBuild::finish() {
  if (progress_) progress_->finish();
  write_->finish(plan_.recomputed());
}

BuildReport SplitBuild::report() const {
  BuildReport r = report_;
  r.prefix_seconds = encoder_->prefix_seconds();
  r.prefix_share = encoder_->prefix_share();
  r.stage_seconds = stages_;
  return write_ ? write_->report(std::move(r)) : finished_report(std::move(r), views(), 0, start_);
}

BuildReport SplitBuild::run() {
  BuildStageSeconds& s = stages_;
  timed(&s.open, [&] { open(); });
  if (plan_.unchanged()) return report();
  begin();
  BuildChunk chunk, next;
  ChunkReader reader(*inputs_, plan_.todo(), plan_.next(), chunk_size());
  ChunkWriter writer(split().writer(), progress_.get());
  auto prepare = [&](BuildChunk* c) {
    if (!timed(&s.lookup, [&] { return next_chunk(c); })) return false;
    timed(&s.read, [&] { reader.read(c); });
    timed(&s.start, [&] { encoder_->start(c); });
    return true;
  };
  // Each chunk's prefix starts before the chunk before it is encoded: on a GPU the device
  // computes it while the outputs before it come back, are encoded and are written.
  for (bool more = prepare(&chunk); more; chunk = std::move(next)) {
    more = prepare(&next);
    timed(&s.outputs, [&] { encoder_->finish(&chunk); });
    StagedWrite w = timed(&s.stage, [&] { return stage_write(&chunk); });
    timed(&s.write_wait, [&] { writer.submit(std::move(w)); });
  }
  timed(&s.write_wait, [&] { writer.finish(); });
  s.encode = encoder_->encode_seconds();  // inside finish: taken out of outputs
  s.outputs -= s.encode;
  s.write = writer.write_seconds();
  timed(&s.finish, [&] { finish(); });
  return report();
}

std::vector<std::vector<int64_t>> SplitBuild::plan_batches() {
  std::vector<std::vector<int64_t>> out;
  BuildChunk chunk;
  while (next_chunk(&chunk)) {  // each key listed once: later chunks do not list it again
    if (chunk.compute_pos.empty()) continue;
    std::vector<int64_t> items(chunk.compute_pos.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const int64_t view = inputs_->views() > 0 ? chunk.compute_views[i] : 0;
      items[i] = plan_.compute_item(chunk.compute_pos[i], view);
    }
    out.push_back(std::move(items));
  }
  plan_.rewind();
  progress_.reset();
  return out;
}

void SplitBuild::ingest_and_index(const std::vector<std::string>& files, int64_t computed,
                                  int64_t bytes) {
  split().ingest_records(files);
  write_->add_ingested(computed, bytes);
  BuildChunk chunk;  // no records: index entries and counts only
  while (plan_.next_chunk(chunk_size(), &chunk.begin, &chunk.end)) write_chunk(&chunk);
}

}  // namespace recycle
