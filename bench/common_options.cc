#include "bench/common_options.h"

#include <unistd.h>

#include <filesystem>

namespace recycle::bench {

namespace fs = std::filesystem;

const char* task_name(Task t) {
  switch (t) {
    case Task::image:
      return "image";
    case Task::text:
      return "text";
    case Task::minilm:
      return "minilm";
  }
  return "?";
}

const char* codec_name(Codec c) {
  switch (c) {
    case Codec::fp32:
      return "fp32";
    case Codec::fp16:
      return "fp16";
    case Codec::bf16:
      return "bf16";
    case Codec::int8:
      return "int8";
  }
  return "?";
}

int cores() { return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)); }

std::string CommonOptions::work_dir() const { return fs::absolute(out).string(); }

std::string CommonOptions::tool(const std::string& name) const { return tools_dir + "/" + name; }

int CommonOptions::threads_or_cores() const { return threads > 0 ? threads : cores(); }

nlohmann::json CommonOptions::to_json() const {
  return {{"samples", samples}, {"epochs", epochs}, {"seeds", seeds}, {"weights", weights}};
}

bool given(const CLI::App& app, const std::string& flag) {
  return app.get_option(flag)->count() > 0;
}

void add_common_flags(CLI::App* app, CommonOptions* o) {
  add_enum_option<Task>(app, "--task", &o->task,
                        {{"image", Task::image}, {"text", Task::text}, {"minilm", Task::minilm}},
                        "image (Fashion-MNIST), text (SpamAssassin mails from --text-dir; only "
                        "the ratio table: no --peer, --nproc or --targets) or minilm (those mails "
                        "with the pretrained all-MiniLM-L6-v2 under --python: docs/minilm.md)");
  app->add_option("--text-dir", o->text_dir,
                  "with --task text or minilm: the folder scripts/fetch_spam_corpus.sh wrote (pretrain/ and "
                  "finetune/)")
      ->capture_default_str();
  app->add_flag("--quick", o->quick,
                "fewer samples and epochs, one seed (image: under 10 "
                "minutes; 2,000 samples, 2 epochs, or 3 with --nproc; text: "
                "1,000 samples, 4 epochs, the encoder still pretrained 3 "
                "epochs; minilm: k = 3, 160 mails of 64 tokens, one engine round; README has "
                "the time)");
  app->add_option("--weights", o->weights, "pretrained encoder (default: pretrain one in --out)")
      ->check(CLI::ExistingFile);
  // Every flag is checked here, so that bad usage exits 2 with this tool's own message
  // rather than failing later in a child.
  app->add_option("--pretrain-epochs", o->pretrain_epochs)
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  app->add_option("--pretrain-limit", o->pretrain_limit, "0 = all")
      ->check(CLI::Range(int64_t{0}, int64_t{30000}))
      ->capture_default_str();
  app->add_option("--samples", o->samples, "training samples of the fine-tuning task")
      ->check(CLI::Range(int64_t{1}, int64_t{30000}))
      ->capture_default_str();
  app->add_option("--epochs", o->epochs)
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  app->add_option("--seeds", o->seeds)
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->capture_default_str();
  app->add_option("--batch", o->batch, "samples per training step (text: 32 unless given)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  app->add_option("--threads", o->threads, "0 = every core")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  add_enum_option<Codec>(
      app, "--codec", &o->codec,
      {{"fp32", Codec::fp32}, {"fp16", Codec::fp16}, {"bf16", Codec::bf16}, {"int8", Codec::int8}},
      "");
  app->add_option("--out", o->out, "output directory")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.empty() ? std::string("must not be empty") : std::string();
          },
          "DIR"))
      ->capture_default_str();
  app->add_option("--tools-dir", o->tools_dir,
                  "where recycle-build and recycle-train are (default: beside this program)");
  app->add_option("--peer-script", o->peer_script)->capture_default_str();
  app->add_option("--python", o->python, "interpreter with torch")->capture_default_str();
}

void apply_common_defaults(const CLI::App& app, CommonOptions* o) {
  if (o->quick) {
    if (!given(app, "--samples")) o->samples = o->text() ? 1000 : 2000;
    // Medians need a few epochs; the transformer needs 4 to learn the text task.
    if (!given(app, "--epochs")) o->epochs = o->text() ? 4 : 2;
    if (!given(app, "--seeds")) o->seeds = 1;
    if (!given(app, "--pretrain-epochs")) o->pretrain_epochs = o->text() ? 3 : 1;
    if (!given(app, "--pretrain-limit")) o->pretrain_limit = o->text() ? 0 : 10000;
  }
  if (o->text() && !given(app, "--batch")) o->batch = 32;
}

}  // namespace recycle::bench
