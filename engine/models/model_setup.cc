#include "engine/models/model_setup.h"

#include <omp.h>

#include <thread>

#include "engine/data/data_source.h"  // parse_data_spec
#include "engine/models/encoder_registry.h"
#include "engine/models/pt2_model.h"
#include "engine/models/weights_io.h"
#include "engine/util/cores.h"

namespace recycle {

namespace {

// The encoder options that the input's shape (C, H, W) sets.
constexpr const char* kShapeOptions[] = {"in_channels", "in_height", "in_width"};

// The encoder `options` name (or the data's default), its input shape set from `data`, its
// ranges checked. Throws std::invalid_argument for data the encoder does not take and for options
// a --weights file sets.
EncoderSpec encoder_spec_for(const ModelOptions& options, const Dataset& data) {
  const EncoderInput input = data.is_text ? EncoderInput::kText : EncoderInput::kImage;
  EncoderSpec spec =
      resolve_encoder_spec(options.encoder.empty() ? default_encoder_for(input) : options.encoder);
  const EncoderInfo& info = encoder_info(spec.name);
  if (input != info.input) {
    throw std::invalid_argument(spec.name + " needs " + input_name(info.input) + " data");
  }
  if (spec.name == pt2_info().name) {
    check_pt2_input(spec.file, data.token_ids);
  } else if (data.token_ids) {
    throw std::invalid_argument("token ids (npy:DIR with SPLIT_mask.npy) are the input of a text "
                                "prefix from recycle.export: give --model pt2:FILE, not " +
                                spec.name);
  }
  if (!options.weights.empty() && !options.encoder.empty() &&
      !EncoderSpec::parse(options.encoder).options.empty()) {
    throw std::invalid_argument(
        "--model options apply only without --weights (the weights file "
        "sets them)");
  }
  if (options.width > 0) spec.set("width", options.width);
  if (options.max_tokens > 0) {
    if (!options.weights.empty()) {
      throw std::invalid_argument(
          "--max-tokens applies only without --weights (the weights file "
          "sets it)");
    }
    spec.set("max_tokens", options.max_tokens);
  }
  // The input shape's options come from the data (C, H, W of one sample); token ids have none
  // (their padded length is not part of the model: texts are keyed without padding).
  for (size_t i = 0; i < 3 && !data.token_ids; ++i) {
    if (spec.has(kShapeOptions[i]) && i < data.item_shape.size()) {
      spec.set(kShapeOptions[i], data.item_shape[i]);
    }
  }
  return resolve_encoder_spec(spec.to_string());  // checks the ranges again
}

}  // namespace

void set_thread_count(int threads) {
  if (threads < 0) throw std::invalid_argument("--threads must be 0 (all cores) or positive");
  const int n = threads > 0 ? threads : usable_cores();
  torch::set_num_threads(n);
  omp_set_num_threads(n);
}

PreparedModel prepare_model(const ModelOptions& options, const Dataset& data, double recycle,
                            const std::string& split_at, const torch::Device& device) {
  const EncoderSpec spec = encoder_spec_for(options, data);
  const int64_t classes = static_cast<int64_t>(data.class_names.size());

  PreparedModel pm;
  torch::manual_seed(options.seed);
  if (options.weights.empty()) {
    pm.model = make_encoder(spec.to_string(), classes);
  } else {
    pm.model = load_block_model(options.weights, options.encoder);
    // The file decides every option but the input shape, which the data decides; an encoder
    // loaded from a file must name the same file, unchanged.
    const EncoderSpec have = resolve_encoder_spec(pm.model.spec);
    EncoderSpec want = have;
    want.name = spec.name;
    want.file = spec.file;
    want.digest = spec.digest;
    for (const char* name : kShapeOptions) {
      if (want.has(name)) want.set(name, spec.get(name));
    }
    if (!(have == want)) {
      throw std::runtime_error("weights " + options.weights + " are for " + have.to_string() +
                               ", the data needs " + want.to_string());
    }
  }
  // A scripted file's own classifier (as many outputs as the data has classes) is kept as
  // pretrained; without weights any other classifier is new.
  pm.classifier_is_new = options.weights.empty() ? !pm.model.classifier->is_own()
                                                 : pm.model.class_names != data.class_names;
  if (pm.classifier_is_new && !options.weights.empty()) pm.model.reset_classifier(classes);
  pm.model.class_names = data.class_names;
  pm.model.to(device);

  int64_t prefix_blocks = 0;
  if (spec.name == pt2_info().name) {
    // A package runs whole and cannot train: it is the prefix, the classifier the head.
    if ((recycle >= 0 && recycle != 1.0) || (recycle < 0 && !split_at.empty() &&
                                             split_at != pm.model.block_names.back())) {
      throw std::invalid_argument("a pt2 model is one frozen block, the whole package: give "
                                  "--recycle 1 or leave it out (export the part to cache)");
    }
    prefix_blocks = 1;
  } else if (recycle >= 0) {
    prefix_blocks = prefix_blocks_for_ratio(pm.model, recycle);
  } else if (!split_at.empty()) {
    prefix_blocks = prefix_blocks_for_name(pm.model, split_at);
  } else {
    throw std::invalid_argument("give --recycle R or --split-at BLOCK");
  }
  pm.split = split_block_model(pm.model, prefix_blocks);
  return pm;
}

DatasetOptions with_encoder_input(DatasetOptions data, const ModelOptions& options) {
  const std::optional<DataSpec> spec_of_data = parse_data_spec(data.spec);
  if (!spec_of_data || !spec_of_data->sized_by_encoder) return data;
  if (options.weights.empty() && options.encoder.empty()) return data;
  const EncoderSpec spec = EncoderSpec::parse(
      options.weights.empty() ? options.encoder : read_weights_spec(options.weights));
  data.encoder_input.assign(3, 0);
  for (size_t i = 0; i < 3; ++i) {
    if (spec.has(kShapeOptions[i])) data.encoder_input[i] = spec.get(kShapeOptions[i]);
  }
  return data;
}

}  // namespace recycle
