// include/recycle/writer.h: a cache split filled chunk by chunk by a program's own prefix. The
// writes are recycle-build's, a SplitWriter's (cache/split_writer.h): the split marked
// incomplete in its first write, each chunk's records, index entries and the manifest's counts
// in one batch without the write-ahead log, the split marked complete and the memtables flushed
// at the end.
// The cache is opened, checked, begun, staged into and finished by the same SplitTransaction as
// recycle-build's (engine/precompute/split_transaction.h) and planned by the same KeyPlan
// (engine/precompute/key_plan.h). What differs: the samples arrive in order, a chunk at a
// time, so the plan is made chunk by chunk (KeyPlan::add_chunk) against the stored index instead
// of for the whole split first. What is its own: checking the caller's tensors.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unordered_set>

#include "base/range_check.h"
#include "cache/activation_store.h"
#include "cache/codec.h"
#include "cache/record.h"
#include "cache/record_layout.h"
#include "cache/shard_rule.h"
#include "cache/split_writer.h"
#include "cache/writable_split.h"
#include "engine/jobs/tensor_keys.h"
#include "engine/models/model_setup.h"
#include "engine/models/weights_io.h"
#include "engine/options/writer_layout.h"
#include "engine/precompute/key_plan.h"
#include "engine/precompute/prefix_identity.h"
#include "engine/precompute/split_transaction.h"
#include "engine/train/batch_sources.h"  // torch_dtype
#include "engine/util/parallel_loop.h"
#include "recycle/content_hasher.h"
#include "recycle/errors.h"
#include "recycle/keyer.h"
#include "recycle/options.h"  // kMaxWorldSize
#include "recycle/writer.h"

namespace recycle {

namespace {

TypedArrayRef array_of(const torch::Tensor& t, Dtype d, std::vector<int64_t> shape, Codec codec,
                       int64_t row) {
  switch (d) {
    case Dtype::kFloat32:
      return TypedArrayRef::floats(t[row].data_ptr<float>(), std::move(shape), codec);
    case Dtype::kInt64:
      return TypedArrayRef::exact(t[row].data_ptr<int64_t>(), std::move(shape));
    case Dtype::kInt32:
      return TypedArrayRef::exact(t[row].data_ptr<int32_t>(), std::move(shape));
    case Dtype::kUint8:
      return TypedArrayRef::exact(t[row].data_ptr<uint8_t>(), std::move(shape));
    case Dtype::kBool:
      return TypedArrayRef::exact(t[row].data_ptr<bool>(), std::move(shape));
  }
  throw std::logic_error("unknown dtype");
}

// What the options name that has no type: the keyer (its spec) and the record layout (checked
// as a whole). Throws InvalidArgument (one line, naming the option) for options that cannot make
// a cache (WriterOptions::validate); reads no file.
struct ParsedOptions {
  std::unique_ptr<Keyer> keyer;
  RecordLayout layout;
};

ParsedOptions parse_options(const WriterOptions& o) {
  o.validate();
  ParsedOptions p;
  p.keyer = make_keyer(o.keyer);
  p.layout = writer_record_layout(o);
  return p;
}

// The manifest the options ask for, `keyer` and `layout` made from them; an engine model's
// identity when one is named (engine_model / engine_weights), the model prepared into *engine:
// the records must match its prefix.
Manifest requested_manifest(const WriterOptions& o, const Keyer& keyer, const RecordLayout& layout,
                            std::unique_ptr<PreparedModel>* engine) {
  Manifest wanted;
  wanted.model = o.model;
  wanted.fingerprint = o.fingerprint;
  wanted.split_at = o.split_at;
  wanted.keyer = keyer.spec();
  wanted.codec = o.codec;
  wanted.preprocess = o.preprocess;
  wanted.input_shape = o.input_shape;
  wanted.record_layout = layout;
  wanted.record_shapes = layout_shapes(layout);
  wanted.class_names = o.class_names;
  wanted.classifier = kClassifierNone;  // a program's prefix: the head is the program's
  if (o.engine_model.empty() && o.engine_weights.empty()) return wanted;
  Dataset d;  // what prepare_model reads of the data: one input's shape, the classes
  d.item_shape = o.input_shape;
  d.class_names = o.class_names;
  ModelOptions mo;
  mo.encoder = o.engine_model;
  mo.weights = o.engine_weights;
  try {
    mo.validate();
    *engine =
        std::make_unique<PreparedModel>(prepare_model(mo, d, -1.0, o.engine_split_at, torch::kCPU));
  } catch (const std::invalid_argument& e) {
    throw InvalidArgument(e.what());
  }
  if ((*engine)->split.prefix_blocks == 0) {
    throw InvalidArgument("the engine model's prefix is empty: name one of its blocks");
  }
  set_prefix_identity((*engine)->model, (*engine)->split, &wanted);
  wanted.classifier = classifier_word((*engine)->classifier_is_new);
  return wanted;
}

}  // namespace

struct CacheWriter::Impl {
  WriterOptions o;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  Codec codec = Codec::kFp16;
  std::unique_ptr<Keyer> keyer;
  RecordLayout layout;
  // The split's write (its cache's manifest: the stored one, or the requested one for a new
  // cache, with this run's counts), and the plan, fed chunk by chunk (KeyPlan::add_chunk).
  std::unique_ptr<SplitTransaction> write;
  KeyPlan plan;
  std::unordered_set<Key, KeyHash> seen;  // distinct keys of the split so far
  bool stored_complete = false;           // the stored split was complete, same data and size
  bool classes_changed = false;
  bool matched_so_far = true;  // every position so far matched the stored index

  // The chunk between add_chunk and write_chunk.
  bool pending = false;
  int64_t chunk_begin = 0;
  std::vector<Key> chunk_keys;
  std::vector<int64_t> chunk_labels;
  size_t todo_begin = 0, todo_end = 0;  // plan.todo()[begin, end): entries written
  std::vector<int64_t> compute;         // rows (of the chunk's kept ones) whose record is computed
  std::vector<int64_t> kept_rows;       // a shard's: the rows of add_chunk's inputs it keeps
  int64_t next = 0;                     // samples added (a shard's: kept)
  int64_t next_in_split = 0;            // a shard's: the whole split's samples seen

  // engine_model / engine_weights: the engine's model, whose prefix the records must match.
  std::unique_ptr<PreparedModel> engine;
  bool engine_checked = false;
  torch::Tensor chunk_inputs;  // add_chunk's inputs, for the check against the engine's prefix

  explicit Impl(const WriterOptions& options) : o(options) {
    ParsedOptions parsed = parse_options(o);
    codec = o.codec;
    keyer = std::move(parsed.keyer);
    layout = std::move(parsed.layout);
    SplitRequest r;
    r.where = {o.cache_dir, o.split, o.compression, o.rebuild};
    r.wanted = requested_manifest(o, *keyer, layout, &engine);
    // A new cache of an engine model gets its head's initial weights, as recycle-build's does.
    if (engine) r.head = [this] { return module_to_bytes(*engine->split.head); };
    r.shard = split_shard(o.shard, o.shard.split_samples);
    r.start_over = "pass rebuild=True to start over";
    r.elsewhere = "use another path, or rebuild=True to start over";
    write = std::make_unique<SplitTransaction>(std::move(r), stored_checks(), start);
    const bool new_cache = split().stored() == nullptr;
    split().writer().set_flush_seconds(o.flush_seconds);
    stored_complete = split().complete_for(o.data, o.samples);
    plan.set_damaged(split().damaged());
    plan.plan(split().take_index(), {}, false, split().had_records());
    // A new cache gets its manifest (the split marked incomplete) at once, as recycle-build's
    // does before its first chunk: a build that fails before its first write leaves a cache
    // that inspect reads and a rerun resumes, not database files without a manifest.
    if (new_cache) begin();
  }

  WritableSplit& split() { return write->split(); }
  // The shard this writer fills (SplitInfo::shard): none for the whole split.
  const SplitShard& shard() const { return write->request().shard; }

  // The writer's own checks of a stored manifest (the transaction makes the common ones): the
  // class names named must be the cache's; a cache with none gets them.
  StoredChecks stored_checks() const {
    StoredChecks c;
    c.after = [this](Manifest* stored) {
      if (!o.class_names.empty() && !stored->class_names.empty() &&
          stored->class_names != o.class_names) {
        throw InvalidArgument(
            "cache " + o.cache_dir + " has " + std::to_string(stored->class_names.size()) +
            " classes named otherwise than this build's " + std::to_string(o.class_names.size()));
      }
      if (stored->class_names.empty()) stored->class_names = o.class_names;
    };
    return c;
  }

  // The split's first write: its manifest entry (incomplete) and a shorter index cut.
  void begin() {
    SplitInfo info;
    info.data = o.data;
    info.samples = o.samples;
    info.unique = static_cast<int64_t>(seen.size());
    write->begin(info);
  }

  // The split position of the next chunk of n samples (the whole split's, for a shard),
  // refusing more samples than the split was opened for.
  int64_t chunk_start(int64_t n) const;
  // The next chunk by its samples' keys, labels [n] (int64, CPU) and, for an engine model's
  // check, its input tensor (else undefined): a shard keeps its own rows; returns the rows to
  // compute, in the caller's chunk.
  std::vector<int64_t> add_keyed(std::vector<Key> keys, const torch::Tensor& labels, int64_t first,
                                 torch::Tensor inputs);
  // One record per computed row of the checked outputs `out`, encoded by the layout's codecs,
  // a variable first dimension cut to the row's length (lengths[row]).
  std::vector<std::string> encode(const std::vector<torch::Tensor>& out,
                                  const std::vector<int64_t>& lengths) const;

  // `sample`: the label's position in the split, for the message.
  void grow_classes(int64_t label, int64_t sample) {
    const std::string problem = class_id_problem(label, sample);  // before 2**40 names are made
    if (!problem.empty()) throw InvalidArgument(problem);
    if (!o.class_names.empty() && label >= static_cast<int64_t>(o.class_names.size())) {
      throw InvalidArgument("label " + std::to_string(label) + " is outside the " +
                            std::to_string(o.class_names.size()) + " classes named");
    }
    std::vector<std::string>& names = split().manifest().class_names;
    while (static_cast<int64_t>(names.size()) <= label) {
      names.push_back(std::to_string(names.size()));
      classes_changed = true;
    }
  }
};

CacheWriter::CacheWriter(const WriterOptions& options) : impl_(std::make_unique<Impl>(options)) {}
CacheWriter::~CacheWriter() = default;

int64_t CacheWriter::position() const { return impl_->next; }

void CacheWriter::skip_other_shards(int64_t n) {
  Impl& s = *impl_;
  if (!s.o.shard.sharded()) throw InvalidArgument("skip_other_shards: this writer has no shard");
  if (s.pending) throw std::logic_error("CacheWriter: write_chunk must follow add_chunk");
  if (n < 0 || s.next_in_split + n > s.o.shard.split_samples) {
    throw InvalidArgument("skip_other_shards(" + std::to_string(n) +
                          "): " + std::to_string(s.next_in_split) + " of the split's " +
                          std::to_string(s.o.shard.split_samples) + " samples came already");
  }
  s.next_in_split += n;
}
bool CacheWriter::unchanged_so_far() const {
  return impl_->stored_complete && impl_->matched_so_far && !impl_->classes_changed;
}

namespace {

// Labels of a chunk of n samples: int64 [n] on the CPU (InvalidArgument otherwise).
torch::Tensor chunk_labels_of(const at::Tensor& labels, int64_t n) {
  if (labels.dim() != 1 || labels.size(0) != n) {
    throw InvalidArgument("labels must be one per input: " + std::to_string(n) +
                          " inputs, labels of shape " + shape_string(labels.sizes().vec()));
  }
  return labels.detach().to(torch::kCPU, torch::kInt64).contiguous();
}

}  // namespace

int64_t CacheWriter::Impl::chunk_start(int64_t n) const {
  if (pending) throw std::logic_error("CacheWriter: write_chunk must follow add_chunk");
  const bool sharded = o.shard.sharded();
  const int64_t split_samples = sharded ? o.shard.split_samples : o.samples;
  const int64_t first = sharded ? next_in_split : next;  // the chunk's split position
  if (first + n > split_samples) {
    throw InvalidArgument("more samples than the " + std::to_string(split_samples) +
                          " the split was opened for");
  }
  return first;
}

std::vector<int64_t> CacheWriter::Impl::add_keyed(std::vector<Key> keys,
                                                  const torch::Tensor& labels, int64_t first,
                                                  torch::Tensor inputs) {
  const int64_t n = static_cast<int64_t>(keys.size());
  const int64_t* lp = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) grow_classes(lp[i], first + i);
  chunk_keys = std::move(keys);
  chunk_labels.assign(lp, lp + n);
  kept_rows.clear();
  const bool sharded = o.shard.sharded();
  if (sharded) {  // the shard's rows only, from here on
    kept_rows = rows_of_shard(chunk_keys, o.shard);
    next_in_split += n;
    if (next + static_cast<int64_t>(kept_rows.size()) > o.samples) {
      throw InvalidArgument("more samples of " + shard_words(shard()) + " than the " +
                            std::to_string(o.samples) + " it was opened for");
    }
    if (inputs.defined()) inputs = inputs.index_select(0, torch::tensor(kept_rows, torch::kInt64));
    chunk_keys = rows_at(chunk_keys, kept_rows);
    chunk_labels = rows_at(chunk_labels, kept_rows);
  }
  chunk_inputs = inputs;
  chunk_begin = next;
  for (const Key& k : chunk_keys) seen.insert(k);
  plan.add_chunk(chunk_keys, chunk_labels, &todo_begin, &todo_end);
  if (todo_end > todo_begin) matched_so_far = false;
  std::vector<int64_t> pos, view_of;
  std::vector<Key> missing;
  plan.find_missing(todo_begin, todo_end, split().store(), &pos, &missing, &view_of);
  compute.clear();
  for (int64_t p : pos) compute.push_back(p - chunk_begin);
  next += static_cast<int64_t>(chunk_keys.size());
  pending = true;
  if (!sharded) return compute;
  std::vector<int64_t> rows;  // in the caller's chunk
  for (int64_t c : compute) rows.push_back(kept_rows[static_cast<size_t>(c)]);
  return rows;
}

std::vector<int64_t> CacheWriter::add_chunk(const at::Tensor& inputs_in,
                                            const at::Tensor& labels_in) {
  Impl& s = *impl_;
  if (inputs_in.dim() < 1) throw InvalidArgument("inputs must have the batch as dimension 0");
  const int64_t n = inputs_in.size(0);
  const torch::Tensor labels = chunk_labels_of(labels_in, n);
  const int64_t first = s.chunk_start(n);
  torch::Tensor inputs = inputs_in.detach().to(torch::kCPU).contiguous();
  const std::vector<int64_t> row_shape = inputs.sizes().slice(1).vec();
  if (!s.o.input_shape.empty() && row_shape != s.o.input_shape) {
    throw InvalidArgument("inputs of shape " + shape_string(row_shape) +
                          " per sample, the build's are " + shape_string(s.o.input_shape));
  }
  std::vector<Key> keys;
  key_rows(*s.keyer, inputs, first, &keys);
  return s.add_keyed(std::move(keys), labels, first, inputs);
}

std::vector<int64_t> CacheWriter::add_text_chunk(const std::vector<std::string>& texts,
                                                 const at::Tensor& labels_in) {
  Impl& s = *impl_;
  const int64_t n = static_cast<int64_t>(texts.size());
  const torch::Tensor labels = chunk_labels_of(labels_in, n);
  const int64_t first = s.chunk_start(n);
  if (s.engine) throw InvalidArgument("an engine model's prefix takes tensors, not texts");
  std::vector<Key> keys;
  key_texts(*s.keyer, texts, first, &keys);
  return s.add_keyed(std::move(keys), labels, first, torch::Tensor());
}

std::vector<int64_t> CacheWriter::add_named_chunk(const std::vector<NamedTensors>& samples,
                                                  const at::Tensor& labels_in) {
  Impl& s = *impl_;
  const int64_t n = static_cast<int64_t>(samples.size());
  const torch::Tensor labels = chunk_labels_of(labels_in, n);
  const int64_t first = s.chunk_start(n);
  if (s.engine) {
    throw InvalidArgument("an engine model's prefix takes one tensor a sample, not named tensors");
  }
  std::vector<Key> keys;
  key_named(*s.keyer, samples, first, &keys);
  return s.add_keyed(std::move(keys), labels, first, torch::Tensor());
}

namespace {

// Whether a record tensor's first dimension varies (a sequence's tokens).
bool variable_first(const TensorLayout& l) {
  return !l.shape.empty() && l.shape[0] == kVariableDim;
}

// `lengths`: one per computed row, 1 to the padded length, when the layout has a variable first
// dimension; none otherwise.
void check_lengths(const RecordLayout& layout, const std::vector<torch::Tensor>& out,
                   const std::vector<int64_t>& lengths, int64_t m) {
  int64_t padded = -1;
  for (size_t j = 0; j < layout.size(); ++j) {
    if (!variable_first(layout[j])) continue;
    const int64_t l = m > 0 ? out[j].size(1) : 0;
    if (padded >= 0 && l != padded) {
      throw InvalidArgument("the prefix's sequence outputs have " + std::to_string(padded) +
                            " and " + std::to_string(l) + " positions: one length a batch");
    }
    padded = l;
  }
  if (padded < 0) {
    if (!lengths.empty()) throw InvalidArgument("lengths are given, but no record tensor varies");
    return;
  }
  if (static_cast<int64_t>(lengths.size()) != m) {
    throw InvalidArgument("one length per computed row is needed: " + std::to_string(m) +
                          " rows, " + std::to_string(lengths.size()) + " lengths");
  }
  for (int64_t len : lengths) {
    if (len < 1 || len > padded) {
      throw InvalidArgument("a row's length must be 1 to " + std::to_string(padded) + ", not " +
                            std::to_string(len));
    }
  }
}

// The program's outputs for m computed rows, checked against the layout (count, shape, dtype)
// and made [m, ...] contiguous on the CPU in the layout's dtypes.
std::vector<torch::Tensor> checked_outputs(const std::vector<at::Tensor>& outputs,
                                           const RecordLayout& layout, int64_t m) {
  if (outputs.size() != layout.size()) {
    throw InvalidArgument("the prefix gave " + std::to_string(outputs.size()) +
                          " tensors, the records hold " + std::to_string(layout.size()) + " (" +
                          layout_string(layout) + ")");
  }
  std::vector<torch::Tensor> out;
  for (size_t j = 0; j < layout.size(); ++j) {
    const TensorLayout& l = layout[j];
    torch::Tensor t = outputs[j].detach();
    std::vector<int64_t> want = {m};
    want.insert(want.end(), l.shape.begin(), l.shape.end());
    // A variable first dimension (a sequence's tokens): any length, the rows cut by `lengths`.
    if (variable_first(l) && t.dim() >= 2) want[1] = t.size(1);
    if (t.sizes().vec() != want) {
      throw InvalidArgument("the prefix's output '" + l.name + "' has shape " +
                            shape_string(t.sizes().vec()) + " for " + std::to_string(m) +
                            " samples, the records hold " + shape_string(l.shape) + " per sample");
    }
    const std::string is =
        "the prefix's output '" + l.name + "' is " + std::string(c10::toString(t.scalar_type()));
    if (l.dtype == Dtype::kFloat32) {
      if (!t.is_floating_point()) throw InvalidArgument(is + ", the records hold float32");
    } else if (t.scalar_type() != torch_dtype(l.dtype)) {
      throw InvalidArgument(is + ", the records hold " + dtype_name(l.dtype));
    }
    out.push_back(t.to(torch::kCPU, torch_dtype(l.dtype)).contiguous());
  }
  return out;
}

// The chunk's first computed rows (`rows` of `inputs`, up to 16) through the engine model's
// prefix: the program's outputs `out` must be its outputs (InvalidArgument naming the
// difference; `m` the manifest, for its model and split point).
void check_against_engine(PreparedModel& engine, const torch::Tensor& inputs,
                          const std::vector<int64_t>& rows, const std::vector<torch::Tensor>& out,
                          const RecordLayout& layout, const Manifest& m) {
  const int64_t k = std::min<int64_t>(static_cast<int64_t>(rows.size()), 16);
  const torch::Tensor some = torch::tensor(std::vector<int64_t>(rows.begin(), rows.begin() + k));
  torch::Tensor want;
  {
    torch::NoGradGuard no_grad;
    engine.split.prefix->eval();
    want = engine.split.prefix->forward(inputs.index_select(0, some).to(torch::kFloat32))
               .to(torch::kFloat32);
  }
  if (layout.size() != 1 || want.sizes() != out[0].narrow(0, 0, k).sizes()) {
    throw InvalidArgument("the engine model's prefix makes " + shape_string(want.sizes().vec()) +
                          ", the program's prefix " + layout_string(layout) + " per sample");
  }
  const double scale = std::max(1.0, want.abs().max().item<double>());
  const double diff = (out[0].narrow(0, 0, k) - want).abs().max().item<double>();
  if (!(diff <= 1e-3 * scale)) {
    throw InvalidArgument("the prefix's outputs differ from the engine model's prefix (" + m.model +
                          " up to " + m.split_at + ") by up to " + std::to_string(diff) +
                          ": not the same model or weights");
  }
}

}  // namespace

std::vector<std::string> CacheWriter::Impl::encode(const std::vector<torch::Tensor>& out,
                                                   const std::vector<int64_t>& lengths) const {
  const int64_t m = static_cast<int64_t>(compute.size());
  std::vector<std::string> records(static_cast<size_t>(m));
  parallel_loop(m, [&](int64_t r) {
    std::vector<TypedArrayRef> arrays;
    for (size_t j = 0; j < layout.size(); ++j) {
      std::vector<int64_t> shape = layout[j].shape;
      if (variable_first(layout[j])) shape[0] = lengths[static_cast<size_t>(r)];
      arrays.push_back(array_of(out[j], layout[j].dtype, std::move(shape), codec, r));
      arrays.back().name = layout[j].name;  // a refusal names the tensor
    }
    try {
      records[r] = encode_record(arrays);
    } catch (const CodecRangeError& e) {
      throw CodecRangeError(
          "sample at position " + std::to_string(chunk_begin + compute[r]) + ": " + e.what(),
          e.largest());
    }
  });
  return records;
}

void CacheWriter::write_chunk(const std::vector<at::Tensor>& outputs,
                              const std::vector<int64_t>& lengths) {
  Impl& s = *impl_;
  if (!s.pending) throw std::logic_error("CacheWriter: add_chunk must come before write_chunk");
  s.pending = false;  // whatever happens, this chunk is over (a failed one ends the build)
  const int64_t m = static_cast<int64_t>(s.compute.size());
  std::vector<torch::Tensor> out;  // per layout tensor: [m, ...] contiguous on the CPU
  if (m > 0) out = checked_outputs(outputs, s.layout, m);
  check_lengths(s.layout, out, lengths, m);
  if (s.engine && !s.engine_checked && m > 0) {
    check_against_engine(*s.engine, s.chunk_inputs, s.compute, out, s.layout, s.split().manifest());
    s.engine_checked = true;
  }
  s.chunk_inputs = torch::Tensor();
  if (s.todo_end == s.todo_begin) return;  // every entry of the chunk is stored already
  SplitWriter& writer = s.split().writer();
  if (!writer.begun()) s.begin();
  std::vector<std::string> records = s.encode(out, lengths);
  const std::vector<Key> record_keys = rows_at(s.chunk_keys, s.compute);
  s.write->set_unique(static_cast<int64_t>(s.seen.size()));
  StagedWrite w =
      s.write->stage(s.plan, s.todo_begin, s.todo_end, record_keys, &records, [&s](int64_t pos) {
        const size_t i = static_cast<size_t>(pos - s.chunk_begin);
        return IndexEntry{s.chunk_keys[i], s.chunk_labels[i]};
      });
  writer.write(&w);  // flushed every flush_seconds: what was written so far survives a kill
}

BuildReport CacheWriter::finish() {
  Impl& s = *impl_;
  if (s.pending) throw std::logic_error("CacheWriter: write_chunk must follow add_chunk");
  const SplitShard& shard = s.o.shard;
  if (shard.sharded() && (s.next_in_split != shard.split_samples || s.next != s.o.samples)) {
    throw InvalidArgument("the split was opened for " + std::to_string(shard.split_samples) +
                          " samples, " + std::to_string(s.o.samples) + " of them in " +
                          shard_words(s.shard()) + "; " + std::to_string(s.next_in_split) +
                          " came, " + std::to_string(s.next) + " of them in the shard");
  }
  if (s.next != s.o.samples) {
    throw InvalidArgument("the split was opened for " + std::to_string(s.o.samples) + " samples, " +
                          std::to_string(s.next) + " came");
  }
  SplitWriter& writer = s.split().writer();
  if (!unchanged_so_far() || writer.writes() > 0) {
    if (!writer.begun()) s.begin();
    s.write->set_unique(static_cast<int64_t>(s.seen.size()));
    s.write->finish(s.plan.recomputed());
  }
  BuildReport counts;
  counts.cache_dir = s.o.cache_dir;
  counts.split = s.o.split;
  counts.samples = s.o.samples;
  counts.unique = static_cast<int64_t>(s.seen.size());
  return s.write->report(counts);
}

std::string tensors_fingerprint(const std::vector<std::string>& names,
                                const std::vector<at::Tensor>& tensors) {
  if (names.size() != tensors.size()) throw InvalidArgument("one name per tensor");
  ContentHasher hasher;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor c = tensors[i].detach().to(torch::kCPU).contiguous();
    TensorView view;
    const std::string dtype(c10::toString(c.scalar_type()));  // as module_fingerprint names it
    view.dtype = dtype;
    view.shape = c.sizes().vec();
    view.strides = c.strides().vec();
    view.data = c.data_ptr();
    view.element_size = c.element_size();
    hasher.update_field(names[i]);
    hasher.update_tensor(view);
  }
  return hasher.digest().to_hex();
}

namespace {

// The keyer of `spec` for a key pass, and the shard count checked: InvalidArgument for either.
std::unique_ptr<Keyer> shard_keyer(const std::string& spec, int64_t shard_count) {
  check_range("the shard count", shard_count, int64_t{1}, int64_t{kMaxWorldSize});
  try {
    return make_keyer(spec);
  } catch (const std::invalid_argument& e) {
    throw InvalidArgument(e.what());
  }
}

RowShards shards_of_keys(const std::vector<Key>& keys, int64_t shard_count) {
  RowShards out;
  out.keys.reserve(keys.size() * Key::kBytes);
  for (const Key& k : keys) {
    out.shards.push_back(shard_of(k, shard_count));
    out.keys += k.to_bytes();
  }
  return out;
}

}  // namespace

RowShards shards_of_rows(const std::string& keyer_spec, const at::Tensor& inputs_in, int64_t first,
                         int64_t shard_count) {
  const std::unique_ptr<Keyer> keyer = shard_keyer(keyer_spec, shard_count);
  if (inputs_in.dim() < 1) throw InvalidArgument("inputs must have the batch as dimension 0");
  const torch::Tensor inputs = inputs_in.detach().to(torch::kCPU).contiguous();
  std::vector<Key> keys;
  key_rows(*keyer, inputs, first, &keys);
  return shards_of_keys(keys, shard_count);
}

RowShards shards_of_texts(const std::string& keyer_spec, const std::vector<std::string>& texts,
                          int64_t first, int64_t shard_count) {
  const std::unique_ptr<Keyer> keyer = shard_keyer(keyer_spec, shard_count);
  std::vector<Key> keys;
  key_texts(*keyer, texts, first, &keys);
  return shards_of_keys(keys, shard_count);
}

RowShards shards_of_named(const std::string& keyer_spec, const std::vector<NamedTensors>& samples,
                          int64_t first, int64_t shard_count) {
  const std::unique_ptr<Keyer> keyer = shard_keyer(keyer_spec, shard_count);
  std::vector<Key> keys;
  key_named(*keyer, samples, first, &keys);
  return shards_of_keys(keys, shard_count);
}

}  // namespace recycle
