#include "engine/models/model_setup.h"

#include <omp.h>

#include <thread>

namespace recycle {

void set_thread_count(int threads) {
  if (threads < 0) throw std::invalid_argument("--threads must be 0 (all cores) or positive");
  const int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(n);
  omp_set_num_threads(n);
}

PreparedModel prepare_model(const ModelOptions& options, const Dataset& data, double recycle,
                            const std::string& split_at, const torch::Device& device) {
  if (data.is_text) throw std::invalid_argument("resnet18 needs image data");
  ModelSpec spec;
  spec.arch = options.arch;
  spec.width = options.width;
  spec.in_channels = data.item_shape.at(0);
  const int64_t classes = static_cast<int64_t>(data.class_names.size());

  PreparedModel pm;
  torch::manual_seed(options.seed);
  if (options.weights.empty()) {
    pm.model = make_block_model(ModelSpec::parse(spec.to_string()), classes);
  } else {
    ModelSpec loaded_spec = spec;
    pm.model = load_block_model(options.weights);
    loaded_spec.width = pm.model.spec.width;  // the file decides the width
    if (!(pm.model.spec == loaded_spec)) {
      throw std::runtime_error("weights " + options.weights + " are for " +
                               pm.model.spec.to_string() + ", the data needs " +
                               loaded_spec.to_string());
    }
  }
  pm.classifier_is_new = options.weights.empty() || pm.model.class_names != data.class_names;
  if (pm.classifier_is_new && !options.weights.empty()) pm.model.reset_classifier(classes);
  pm.model.class_names = data.class_names;
  pm.model.to(device);

  int64_t prefix_blocks = 0;
  if (recycle >= 0) {
    prefix_blocks = prefix_blocks_for_ratio(pm.model, recycle);
  } else if (!split_at.empty()) {
    prefix_blocks = prefix_blocks_for_name(pm.model, split_at);
  } else {
    throw std::invalid_argument("give --recycle R or --split-at BLOCK");
  }
  pm.split = split_block_model(pm.model, prefix_blocks);
  return pm;
}

}  // namespace recycle
