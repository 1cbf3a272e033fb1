// The options every recycle-bench benchmark shares (samples, epochs, seeds, batch, threads,
// codec, the pretrained encoder, the output directory, the tools, the task), their flags, and
// the enum-option helper the benchmarks' own parsers use for closed sets. Each benchmark's
// options embed one CommonOptions (bench/ratio_bench.h, dist_bench.h, target_bench.h,
// progressive_bench.h). No LibTorch. Not thread safe.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace recycle::bench {

// The transfer task: Fashion-MNIST with ResNet-18 (pretrained on classes 0-4, fine-tuned on
// 5-9), the SpamAssassin mails with the transformer encoder (docs/text-task.md), or those mails
// with a real pretrained encoder, all-MiniLM-L6-v2 (bench/minilm_bench.h, docs/minilm.md).
enum class Task { image, text, minilm };
// The record codecs of recycle-build --codec.
enum class Codec { fp32, fp16, bf16, int8 };

const char* task_name(Task t);
const char* codec_name(Codec c);

struct CommonOptions {
  Task task = Task::image;
  std::string text_dir = "data/spam-assassin";  // --task text: pretrain/ and finetune/ TSVs
  bool quick = false;
  std::string weights;  // pretrained encoder; "" = pretrain one in out
  int64_t pretrain_epochs = 3;
  int64_t pretrain_limit = 0;  // 0 = all 30,000 samples of classes 0-4
  int64_t samples = 5000;      // training samples of the fine-tuning task
  int64_t epochs = 4;
  int64_t seeds = 3;
  int64_t batch = 128;
  int threads = 0;  // 0 = every core
  Codec codec = Codec::fp16;
  std::string out = "bench-out";  // output directory, as given
  std::string tools_dir;          // where recycle-build and recycle-train are
  std::string python = "/usr/bin/python3";
  // The eager PyTorch peer of the ratio table's --peer and of --targets.
  std::string peer_script = std::string(RECYCLE_SOURCE_DIR) + "/bench/peers/eager_peer.py";

  bool text() const { return task == Task::text; }
  // out made absolute: where the children run and the benchmarks other than the ratio table
  // write.
  std::string work_dir() const;
  // tools_dir + "/" + name
  std::string tool(const std::string& name) const;
  // threads, or every core for 0.
  int threads_or_cores() const;
  // "samples", "epochs", "seeds" and "weights": the keys every benchmark's "options" holds.
  nlohmann::json to_json() const;
};

// The number of online cores.
int cores();

// Registers the common flags on `app`, bound to `o`.
void add_common_flags(CLI::App* app, CommonOptions* o);

// Whether `flag` was given on the command line that `app` parsed.
bool given(const CLI::App& app, const std::string& flag);

// --quick's defaults of the ratio table for every common flag not given (the other
// benchmarks then set their own); --task text's batch of 32 when --batch is not given.
void apply_common_defaults(const CLI::App& app, CommonOptions* o);

// A flag over a closed set: `names` maps each accepted spelling to its value; the help shows
// the names and the default as the name of *value. Bad values exit 2 at parsing.
template <typename E>
CLI::Option* add_enum_option(CLI::App* app, const std::string& flag, E* value,
                             const std::vector<std::pair<std::string, E>>& names,
                             const std::string& help) {
  std::vector<std::string> keys;
  std::string default_name;
  for (const auto& [name, v] : names) {
    keys.push_back(name);
    if (v == *value) default_name = name;
  }
  return app
      ->add_option_function<std::string>(
          flag,
          [value, names](const std::string& s) {
            for (const auto& [name, v] : names) {
              if (name == s) *value = v;
            }
          },
          help)
      ->check(CLI::IsMember(keys))
      ->default_str(default_name);
}

// The same over a comma-separated list of values.
template <typename E>
CLI::Option* add_enum_list_option(CLI::App* app, const std::string& flag, std::vector<E>* values,
                                  const std::vector<std::pair<std::string, E>>& names,
                                  const std::string& help) {
  std::vector<std::string> keys;
  std::string default_names;
  for (const auto& [name, v] : names) keys.push_back(name);
  for (E d : *values) {
    for (const auto& [name, v] : names) {
      if (v == d) default_names += (default_names.empty() ? "" : ",") + name;
    }
  }
  return app
      ->add_option_function<std::vector<std::string>>(
          flag,
          [values, names](const std::vector<std::string>& given) {
            values->clear();
            for (const std::string& s : given) {
              for (const auto& [name, v] : names) {
                if (name == s) values->push_back(v);
              }
            }
          },
          help)
      ->check(CLI::IsMember(keys))
      ->delimiter(',')
      ->default_str("[" + default_names + "]");
}

}  // namespace recycle::bench
