#include "bench/transfer_task.h"

#include <filesystem>

#include "bench/bench_util.h"

namespace recycle::bench {

namespace fs = std::filesystem;

std::vector<std::string> pretrain_data(const CommonOptions& o) {
  if (o.text()) return {"--data", "tsv:" + o.text_dir + "/pretrain", "--model", "transformer"};
  return {"--data", "fashion-mnist", "--classes", "0-4"};
}

std::vector<std::string> finetune_data(const CommonOptions& o) {
  if (o.text()) return {"--data", "tsv:" + o.text_dir + "/finetune"};
  return {"--data", "fashion-mnist", "--classes", "5-9"};
}

std::string pretrain_task(const CommonOptions& o) {
  return o.text() ? "the 2002 mails (easy-ham, hard-ham, spam)" : "classes 0-4";
}

std::vector<std::string> optimizer_flags(const CommonOptions& o, bool pretraining) {
  if (!o.text()) return {};
  return {"--optimizer", "adamw", "--lr", pretraining ? "0.001" : "0.003"};
}

std::string find_text_data(CommonOptions* o) {
  if (!fs::exists(o->text_dir + "/finetune/train.tsv") ||
      !fs::exists(o->text_dir + "/pretrain/train.tsv")) {
    return o->text_dir +
           " has no pretrain/ and finetune/ TSV files: run scripts/fetch_spam_corpus.sh " +
           o->text_dir + " first";
  }
  o->text_dir = fs::absolute(o->text_dir).string();
  return "";
}

double ensure_encoder(CommonOptions* o) {
  if (!o->weights.empty()) return 0;
  const std::string work = o->work_dir();
  o->weights = work + "/encoder.pt";
  if (fs::exists(o->weights)) {
    note("reusing " + o->weights);
    return 0;
  }
  note("pretraining the encoder on " + pretrain_task(*o) + " (" +
       std::to_string(o->pretrain_epochs) + " epochs)");
  std::vector<std::string> argv = {o->tool("recycle-train")};
  append(&argv, pretrain_data(*o));
  append(&argv, {"--limit", std::to_string(o->pretrain_limit), "--recycle", "0", "--epochs",
                 std::to_string(o->pretrain_epochs), "--threads", std::to_string(o->threads),
                 "--save-model", o->weights, "--json"});
  append(&argv, optimizer_flags(*o, true));
  const ChildRun r = run_child(argv, work);
  const double acc = r.result.value("test_acc", 0.0);
  note("encoder test accuracy on " + pretrain_task(*o) + ": " + fmt(acc, 4));
  return acc;
}

}  // namespace recycle::bench
