// ChunkEncoder (chunk_encoder.h): the prefix over a chunk's samples, and their records.
#include "engine/precompute/chunk_encoder.h"

#include <filesystem>
#include <numeric>
#include <stdexcept>

#include "base/seconds.h"
#include "base/strings.h"
#include "cache/record.h"
#include "engine/data/byte_tokenizer.h"
#include "engine/models/model_setup.h"
#include "engine/models/preprocess.h"
#include "engine/models/pt2_model.h"
#include "engine/models/transformer.h"
#include "engine/precompute/build_stages.h"  // text_record_layout
#include "engine/precompute/cache_input.h"
#include "engine/precompute/prefix_identity.h"
#include "engine/precompute/prefix_runner.h"
#include "engine/precompute/split_inputs.h"
#include "engine/util/parallel_loop.h"
#include "recycle/errors.h"

namespace recycle {

namespace {

// The absolute path of a --weights file, for the manifest ("" for none).
std::string weights_path(const std::string& weights) {
  if (weights.empty()) return "";
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(weights, ec);
  return ec ? weights : p.lexically_normal().string();
}

// The manifest an image run asks for: identity plus record shapes (a probe forward's).
Manifest requested_manifest(PreparedModel& pm, const std::string& keyer_spec, Codec codec,
                            const Dataset& data, const torch::Device& device) {
  Manifest m;
  set_prefix_identity(pm.model, pm.split, &m);
  m.keyer = keyer_spec;
  m.codec = codec;
  m.preprocess = preprocess_spec(data);
  m.input_shape = data.item_shape;
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape = {1};
  shape.insert(shape.end(), data.item_shape.begin(), data.item_shape.end());
  torch::Tensor probe = pm.split.prefix->forward(torch::zeros(shape, device));
  m.record_shapes = {probe.sizes().slice(1).vec()};
  m.class_names = data.class_names;
  m.classifier = classifier_word(pm.classifier_is_new);
  return m;
}

// The manifest a text run asks for: identity, the tokenizer as its preprocessing, and the
// text record layout (text_record_layout).
Manifest requested_text_manifest(const PreparedModel& pm, const std::string& keyer_spec,
                                 Codec codec, const Dataset& data) {
  Manifest m;
  set_prefix_identity(pm.model, pm.split, &m);
  m.keyer = keyer_spec;
  m.codec = codec;
  m.preprocess = byte_tokenizer_spec();
  m.input_shape = {transformer_max_tokens(pm.model.spec)};
  m.record_layout = text_record_layout(resolve_encoder_spec(pm.model.spec).get("d_model"), codec);
  m.record_shapes = layout_shapes(m.record_layout);
  m.class_names = data.class_names;
  m.classifier = classifier_word(pm.classifier_is_new);
  return m;
}

// The manifest a run over token ids asks for: identity, the ids as the preprocessing, and
// records as recycle.build makes them from recycle.hf.split's prefix (token_record_layout, H
// the prefix's width: a probe forward's).
Manifest requested_token_manifest(PreparedModel& pm, const std::string& keyer_spec,
                                  Codec codec, const Dataset& data, const torch::Device& device) {
  Manifest m;
  set_prefix_identity(pm.model, pm.split, &m);
  m.keyer = keyer_spec;
  m.codec = codec;
  m.preprocess = preprocess_spec(data);
  // No input shape: the padded length is not the content (texts are keyed without padding),
  // so the same texts padded to another length are the same cache.
  torch::NoGradGuard no_grad;
  const torch::Tensor probe =
      pm.split.prefix->forward(torch::ones({1, 2, std::min<int64_t>(data.item_shape.at(1), 2)},
                                           torch::TensorOptions(torch::kInt64).device(device)));
  m.record_layout = token_record_layout(probe.size(2) - 1, codec);
  m.record_shapes = layout_shapes(m.record_layout);
  m.class_names = data.class_names;
  m.classifier = classifier_word(pm.classifier_is_new);
  return m;
}

// The codec's refusal of a sample's values, as one line that names the sample.
[[noreturn]] void throw_for_sample(const Dataset& data, int64_t pos, const CodecRangeError& e) {
  const std::string id = pos < static_cast<int64_t>(data.ids.size()) ? data.ids[pos] + " " : "";
  throw CodecRangeError("sample " + id + "(position " + std::to_string(pos) + "): " + e.what(),
                        e.largest());
}

// Per text of packed outputs [m, L, D + 1]: its valid positions' hidden states and its length
// (the mask channel's sum), encoded by `codec` into records[r]; for token ids
// (token_record_layout) the hidden states and a mask of as many 1s.
void encode_text_records(const torch::Tensor& outputs, int64_t d, Codec codec, const Dataset& data,
                         const std::vector<int64_t>& pos, std::vector<std::string>* records) {
  const int64_t m = outputs.size(0), length = outputs.size(1);
  const torch::Tensor hidden = outputs.narrow(2, 0, d).contiguous();
  const torch::Tensor lengths = outputs.select(2, d).sum(1).round().to(torch::kInt64).contiguous();
  const float* base = hidden.data_ptr<float>();
  const int64_t* len = lengths.data_ptr<int64_t>();
  for (int64_t r = 0; r < m; ++r) {
    if (len[r] < 1 || len[r] > length) {  // the mask channel is 1s then 0s (transformer.h)
      throw std::logic_error("text prefix output " + std::to_string(r) + " has a mask of " +
                             std::to_string(len[r]) + " valid positions of " +
                             std::to_string(length));
    }
  }
  const std::vector<int64_t> ones(static_cast<size_t>(length), 1);
  parallel_loop(m, [&](int64_t r) {
    try {
      const TypedArrayRef hidden = TypedArrayRef::floats(base + r * length * d, {len[r], d}, codec);
      (*records)[r] = encode_record({hidden, data.token_ids
                                                 ? TypedArrayRef::exact(ones.data(), {len[r]})
                                                 : TypedArrayRef::exact(len + r, {})});
    } catch (const CodecRangeError& e) {
      throw_for_sample(data, pos[r], e);
    }
  });
}

}  // namespace

ChunkEncoder::ChunkEncoder(SplitInputs& inputs, const BuildOptions& o)
    : inputs_(inputs), codec_(o.codec) {
  prefix_ = std::make_unique<PrefixRunner>(o.device, o.precision);
  const Dataset& data = inputs_.data();
  // Images run the folded prefix; the plain one (eval mode) makes text records: nothing of a
  // transformer folds.
  prefix_->use_model(prepare_model(o.model, data, o.recycle, o.split_at, prefix_->device()),
                     /*fold=*/!data.is_text && !data.token_ids);
  PreparedModel& pm = prefix_->model();
  if (pm.split.prefix_blocks == 0) {
    throw std::invalid_argument(
        "--recycle 0 caches nothing; train without a cache with recycle-train --recycle 0");
  }
  if (o.precision != Precision::kFp32 && pm.model.spec.rfind(pt2_info().name + ":", 0) == 0) {
    throw std::invalid_argument("--precision does not apply to a pt2 model: a package "
                                "runs in the arithmetic it was compiled with (export it in "
                                "bf16 or fp16 for that)");
  }
  const std::string keyer = inputs_.keyer().spec();
  const torch::Device& device = prefix_->device();
  requested_ = data.is_text     ? requested_text_manifest(pm, keyer, codec_, data)
               : data.token_ids ? requested_token_manifest(pm, keyer, codec_, data, device)
                                : requested_manifest(pm, keyer, codec_, data, device);
  requested_.weights_file = weights_path(o.model.weights);
  set_prefix_precision(o.precision, &requested_);
  record_shape_ = requested_.record_shapes.at(0);
}

ChunkEncoder::ChunkEncoder(SplitInputs& inputs, const BuildOptions& o, CacheBuildInputs in)
    : inputs_(inputs) {
  codec_ = in.manifest.codec;
  // The blocks after the other cache's split point run in the arithmetic its prefix ran in.
  prefix_ = std::make_unique<PrefixRunner>(o.device, prefix_precision_of(in.manifest, o.cache_dir));
  prefix_->use_blocks(*in.blocks, std::move(in.head));
  requested_ = std::move(in.manifest);
  record_shape_ = requested_.record_shapes.at(0);
  cache_input_ = std::move(in.input);
}

ChunkEncoder::~ChunkEncoder() = default;

void ChunkEncoder::compute(BuildChunk* chunk) {
  start(chunk);
  finish(chunk);
}

void ChunkEncoder::start(BuildChunk* chunk) {
  chunk->records.clear();
  chunk->started = false;
  if (chunk->compute_pos.empty()) return;
  const torch::Tensor in = inputs(*chunk);
  chunk->input_length = input_length(in);
  prefix_->start(in);
  chunk->started = true;
}

void ChunkEncoder::finish(BuildChunk* chunk) {
  if (!chunk->started) return;
  chunk->started = false;
  const torch::Tensor outputs = checked(
      prefix_->finish(), static_cast<int64_t>(chunk->compute_pos.size()), chunk->input_length);
  if (share_chunks_ < 2 && prefix_->has_model()) measure_prefix_share(outputs);
  const auto encoding = std::chrono::steady_clock::now();
  encode(outputs, chunk);
  encode_seconds_ += seconds_since(encoding);
}

void ChunkEncoder::measure_prefix_share(const torch::Tensor& outputs) {
  ++share_chunks_;
  const double head_per_sample = prefix_->head_seconds_per_sample(outputs);
  if (head_per_sample < 0 || prefix_->last_seconds() <= 0) return;
  const double prefix_per_sample = prefix_->last_seconds() / static_cast<double>(outputs.size(0));
  prefix_share_ = prefix_per_sample / (prefix_per_sample + head_per_sample);
}

torch::Tensor ChunkEncoder::inputs(const BuildChunk& chunk) {
  const int64_t m = static_cast<int64_t>(chunk.compute_pos.size());
  const torch::Device& device = prefix_->device();
  if (cache_input_) return cache_input_->read(chunk.compute_pos.data(), m);
  if (inputs_.data().is_text) {  // byte tokens of the texts as the keyer hashes them
    return token_batch(inputs_.compute_texts(chunk),
                       transformer_max_tokens(prefix_->model().model.spec), device);
  }
  Dataset read;
  std::vector<int64_t> rows;
  const Dataset& images = inputs_.compute_images(chunk, &read, &rows);
  return image_batch(images, rows.data(), m, device);
}

torch::Tensor ChunkEncoder::prefix_outputs(const torch::Tensor& in) {
  return checked(prefix_->run(in), in.size(0), input_length(in));
}

int64_t ChunkEncoder::input_length(const torch::Tensor& in) const {
  if (inputs_.data().token_ids) return in.size(2);  // [m, 2, L]
  return in.dim() > 1 ? in.size(1) : 0;
}

torch::Tensor ChunkEncoder::checked(const torch::Tensor& out, int64_t m, int64_t length) {
  const std::vector<int64_t>& shape = record_shape_;
  prefix_seconds_ += prefix_->last_seconds();
  // Per sample: the record shape; text and token ids: the packed features [L, D + 1] of the
  // chunk's longest L.
  const Dataset& data = inputs_.data();
  const std::vector<int64_t> expected = data.is_text || data.token_ids
                                            ? std::vector<int64_t>{length, shape.at(1) + 1}
                                            : shape;
  // Records are cut from this buffer by the manifest's shape: check it every time.
  if (out.dim() < 1 || out.size(0) != m || out.sizes().slice(1).vec() != expected) {
    throw std::runtime_error("the prefix made outputs of shape " + shape_string(out.sizes().vec()) +
                             ", the cache's records are " + shape_string(shape) + " per sample");
  }
  return out;
}

void ChunkEncoder::encode(const torch::Tensor& outputs, BuildChunk* chunk) {
  const std::vector<int64_t>& shape = record_shape_;
  const int64_t m = outputs.size(0);
  const Codec codec = codec_;
  const Dataset& data = inputs_.data();
  chunk->records.resize(m);
  if (data.is_text || data.token_ids) {
    encode_text_records(outputs, shape.at(1), codec, data, chunk->compute_pos, &chunk->records);
    return;
  }
  int64_t per_sample = 1;
  for (int64_t d : shape) per_sample *= d;
  const float* base = outputs.data_ptr<float>();
  parallel_loop(m, [&](int64_t r) {
    try {
      chunk->records[r] = encode_record(codec, {FloatArrayRef{base + r * per_sample, shape}});
    } catch (const CodecRangeError& e) {
      throw_for_sample(data, chunk->compute_pos[r], e);
    }
  });
}

}  // namespace recycle
