// Shared command-line plumbing: CLI11 parsing with one-line errors, and the dataset and model
// flags that recycle-build and recycle-train both take.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/strings.h"
#include "engine/data/dataset.h"
#include "engine/distributed/dist_options.h"
#include "engine/models/model_options.h"

namespace recycle {

// Parses argv into `app`, then runs `body`. --help prints to stdout and exits 0; a usage error
// prints "TOOL: ... (see --help)" and returns 2; an exception from body prints "TOOL: error: ..."
// and returns 1 (std::invalid_argument: "TOOL: ..." and 2). An error prints its first line
// (with "(--verbose shows more)" when it has more); the tool's --verbose flag, which run_tool
// adds unless the app has its own, prints it whole. Output that did not reach stdout (a full
// disk, a closed stdout) turns the body's exit code into 1, with one line.
int run_tool(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// Validators: a non-empty string; a whole number >= 0 or >= 1 (the message says so, where
// CLI11's NonNegativeNumber names its upper bound, a 309-digit double). The bounds of numbers are
// the library's (validate(), base/range_check.h): the command line declares no range; kZeroOrMore
// and kOneOrMore only say a count's sign as it is parsed, and keep the library's words for "not
// given" (--nproc 0, --views 0, --prefetch -1) from being typed.
extern const CLI::Validator kNotEmpty;
extern const CLI::Validator kZeroOrMore;
extern const CLI::Validator kOneOrMore;

// A number in a help text as check_range prints it ("0.999", "65536"), and a range
// ("1..65536"): help texts are made from the bounds validate() checks (include/recycle/*.h).
template <typename T>
std::string number_text(T value) {
  std::ostringstream text;
  text << value;
  return text.str();
}
template <typename T>
std::string range_text(T least, T most) {
  return number_text(least) + ".." + number_text(most);
}

// --cache DIR (refuses an empty path as bad usage).
CLI::Option* add_cache_flag(CLI::App& app, std::string* dir, const std::string& help);
// --seed S (a non-negative integer; "-1" is refused rather than wrapped around).
CLI::Option* add_seed_flag(CLI::App& app, uint64_t* seed, const std::string& help);
// An option whose value is one of a closed set (include/recycle/options.h): the word is checked
// against `names` by CLI11 (a usage error naming them) and parsed into *value once; help shows
// `value`'s name as the default.
template <typename E>
CLI::Option* add_enum_option(CLI::App& app, const std::string& flag, E* value,
                             const std::vector<std::string>& names, E (*parse)(std::string_view),
                             const std::string& default_name, const std::string& help = "") {
  return app
      .add_option_function<std::string>(
          flag, [value, parse](const std::string& word) { *value = parse(word); }, help)
      ->check(CLI::IsMember(names))
      ->default_str(default_name);
}

// --data, --split, --classes, --limit, --transform, --on-bad-file, --text-field, --label-field
void add_data_flags(CLI::App& app, DatasetOptions* data);
// --model, --width, --weights
void add_model_flags(CLI::App& app, ModelOptions* model);
// --recycle and --split-at; returns the --recycle option.
CLI::Option* add_split_flags(CLI::App& app, double* recycle, std::string* split_at);

// --nproc, --rank, --world-size, --master, --timeout (data-parallel jobs; see
// engine/distributed/launcher.h). A worker started by the launcher learns it from RECYCLE_LAUNCHED.
void add_dist_flags(CLI::App& app, DistOptions* dist);
// After parsing: notes whether --rank, --world-size or --master was given
// (DistOptions::ranks_by_hand) and checks the data-parallel flags together (DistOptions::validate:
// std::invalid_argument). With --nproc N, starts N local workers running this tool with the same
// arguments and returns the launcher's exit code; otherwise returns -1: this process does the
// work (alone, or as --rank R of --world-size W).
int launch_if_asked(const CLI::App& app, int argc, char** argv, DistOptions& dist, int threads);

// A report's --json object (one line) with "omp_wait": {"policy", "why"} added: the OpenMP wait
// policy the tool chose at load and why (engine/util/omp_wait.h).
std::string json_with_omp_wait(const std::string& report_json);

}  // namespace recycle
