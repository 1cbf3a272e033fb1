#include "engine/cli/cli_common.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error_cause.h"
#include "base/strings.h"
#include "engine/distributed/launcher.h"
#include "engine/models/encoder_registry.h"
#include "engine/util/heap_tuning.h"
#include "engine/util/omp_wait.h"

namespace recycle {

namespace {

// The line of an error that says its cause (error_cause: the first, or for a TorchScript
// script's failure the exception it raised), and a pointer to --verbose when there is more
// (LibTorch and TorchScript append backtraces and tracebacks); the whole of it with --verbose.
std::string error_text(const std::string& what, bool verbose) {
  const size_t nl = what.find('\n');
  if (verbose || nl == std::string::npos) return what;
  return error_cause(what) + " (--verbose shows more)";
}

}  // namespace

int run_tool(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  const std::string tool = app.get_name();
  bool verbose = false;
  if (app.get_option_no_throw("--verbose") == nullptr) {
    app.add_flag("--verbose", verbose, "print errors whole (a TorchScript traceback, a backtrace), "
                                       "not their first line");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::RequiredError& e) {
    // CLI11 checks required flags before it looks at the words it did not know: a mistyped flag
    // would be reported as the required one it was meant to be next to.
    std::vector<std::string> unknown = app.remaining();
    std::reverse(unknown.begin(), unknown.end());  // ExtrasError names them last to first
    std::cerr << tool << ": " << (unknown.empty() ? e.what() : CLI::ExtrasError(unknown).what())
              << " (see --help)" << std::endl;
    return 2;
  } catch (const CLI::ParseError& e) {
    std::cerr << tool << ": " << e.what() << " (see --help)" << std::endl;
    return 2;
  } catch (const std::exception& e) {  // a validator that threw: still one line
    std::cerr << tool << ": " << error_text(e.what(), verbose) << " (see --help)" << std::endl;
    return 2;
  }
  keep_freed_blocks_for_reuse();
  try {
    const int code = body();
    // Output that did not reach its destination (a full disk, a closed stdout) is a failure.
    errno = 0;
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      const int err = errno;
      std::cerr << tool << ": error: could not write the output to standard output"
                << (err ? std::string(": ") + std::strerror(err) : std::string()) << std::endl;
      return 1;
    }
    return code;
  } catch (const std::invalid_argument& e) {
    std::cerr << tool << ": " << error_text(e.what(), verbose) << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << tool << ": error: " << error_text(e.what(), verbose) << std::endl;
    return 1;
  }
}

void add_data_flags(CLI::App& app, DatasetOptions* data) {
  app.add_option("--data", data->spec,
                 "fashion-mnist[:DIR] (Debian's IDX .gz files), tsv:FILE (label<TAB>text), "
                 "tsv:DIR (DIR/SPLIT.tsv for each --split), imagefolder:DIR (your own "
                 "images: DIR/<class>/<file>.png|.jpg, e.g. --data imagefolder:photos "
                 "--split train --transform rgb,resize=64,center-crop=64), npy:DIR "
                 "(DIR/SPLIT_x.npy uint8|float32 N x C x H x W, DIR/SPLIT_y.npy labels), "
                 "jsonl:PATH or csv:PATH (text; PATH or PATH/SPLIT.jsonl|.csv)");
  app.add_option("--split", data->split,
                 "split to read and name: train or test (fashion-mnist), SPLIT.tsv of tsv:DIR, "
                 "DIR/SPLIT/ of imagefolder:DIR when that folder exists (else DIR)")
      ->capture_default_str();
  app.add_option("--transform", data->transform,
                 "imagefolder: file -> encoder input, comma-separated: gray|rgb, resize=S "
                 "(shorter side, antialiased bilinear), center-crop=S, normalize=MEAN/STD "
                 "(':' between channels); default: gray, the files' size, the built-in "
                 "normalisation");
  add_enum_option(app, "--on-bad-file", &data->on_bad_file, bad_file_policy_names(),
                  parse_bad_file_policy, bad_file_policy_name(data->on_bad_file),
                  "imagefolder: a file that cannot be decoded fails the run, or is skipped "
                  "(counted and listed on stderr)");
  app.add_option("--text-field", data->text_field,
                 "jsonl:PATH, csv:PATH: the field (column) holding the text")
      ->capture_default_str();
  app.add_option("--label-field", data->label_field,
                 "jsonl:PATH, csv:PATH: the field holding the label (an integer class id, or a "
                 "name: names map to ids in sorted order)")
      ->capture_default_str();
  app.add_option("--classes", data->classes, "keep these classes, relabelled 0..k-1 (e.g. 5-9)");
  app.add_option("--limit", data->limit, "keep the first N samples (0 = all)")
      ->check(kZeroOrMore)
      ->capture_default_str();
}

const CLI::Validator kNotEmpty(
    [](std::string& value) {
      return value.empty() ? std::string("must not be empty") : std::string();
    },
    "NOT EMPTY");

namespace {

CLI::Validator whole_number_from(long long lo, const char* name) {
  return CLI::Validator(
      [lo](std::string& value) {
        long long v = 0;
        if (!CLI::detail::lexical_cast(value, v) || v < lo) {
          return "must be a whole number, " + std::to_string(lo) + " or more, got " + value;
        }
        return std::string();
      },
      name);
}

}  // namespace

const CLI::Validator kZeroOrMore = whole_number_from(0, "INT >= 0");
const CLI::Validator kOneOrMore = whole_number_from(1, "INT >= 1");

CLI::Option* add_cache_flag(CLI::App& app, std::string* dir, const std::string& help) {
  return app.add_option("--cache", *dir, help)->check(kNotEmpty);
}

CLI::Option* add_seed_flag(CLI::App& app, uint64_t* seed, const std::string& help) {
  const CLI::Validator whole_number(
      [](std::string& value) {
        const bool digits = !value.empty() && value.size() <= 19 &&
                            value.find_first_not_of("0123456789") == std::string::npos;
        return digits ? std::string()
                      : "must be a whole number from 0 to 10^19-1, got " + value;
      },
      "SEED");
  return app.add_option("--seed", *seed, help)->check(whole_number)->capture_default_str();
}

void add_model_flags(CLI::App& app, ModelOptions* model) {
  const CLI::Validator encoder_spec(
      [](std::string& value) {
        // Any failure is the flag's (a bad spec, a file that changed since its digest was
        // taken): CLI11 reports it as a usage error, not an exception escaping the parse.
        try {
          resolve_encoder_spec(value);
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "SPEC");
  const std::string image_encoder = default_encoder_for(EncoderInput::kImage);
  const std::string text_encoder = default_encoder_for(EncoderInput::kText);
  app.add_option("--model", model->encoder,
                 "encoder: NAME[:OPTION=N,...] (known: " + join(encoder_names(), ", ") +
                     "; default: " + image_encoder + " for images, " + text_encoder +
                     " for text; e.g. " + resolve_encoder_spec(image_encoder).to_string() + ", " +
                     resolve_encoder_spec(text_encoder).to_string() +
                     "), torchscript:FILE, a scripted nn.Sequential (docs/torchscript.md), "
                     "or pt2:FILE, an AOTInductor package from recycle.export, the whole prefix "
                     "(docs/pytorch2.md; torch >= 2.6 builds)")
      ->check(encoder_spec);
  app.add_option("--width", model->width,
                 "channels of the first stage, " + range_text(int64_t{1}, kMaxWidth) +
                     " (default: the model's; not with --weights)");
  app.add_option("--max-tokens", model->max_tokens,
                 "text models: tokens (UTF-8 bytes) kept per text, longer texts keep their "
                 "first N bytes, " + range_text(int64_t{1}, kMaxTokensPerText) +
                     " (default: the model's, 128; not with --weights)");
  app.add_option("--weights", model->weights, "weights saved by recycle-train --save-model")
      ->check(CLI::ExistingFile)
      ->check(kNotEmpty);
}

CLI::Option* add_split_flags(CLI::App& app, double* recycle, std::string* split_at) {
  // The bounds are the options' validate()'s (BuildOptions, TrainOptions).
  CLI::Option* r = app.add_option("--recycle", *recycle,
                                  "fraction of encoder blocks frozen and cached, " +
                                      range_text(0, 1) + " (e.g. 0.25, 0.5, 0.75, 1)");
  CLI::Option* s =
      app.add_option("--split-at", *split_at,
                     "name of the last frozen block (e.g. layer2.1), instead of --recycle");
  r->excludes(s);
  return r;
}

}  // namespace recycle

namespace recycle {

void add_dist_flags(CLI::App& app, DistOptions* dist) {
  // The bounds are DistOptions::validate()'s; 0, the library's "no launcher", is not typed.
  app.add_option("--nproc", dist->nproc,
                 "start N local workers, " + range_text(1, kMaxNproc) +
                     " (data-parallel; --threads is split between them)")
      ->check(kOneOrMore);
  app.add_option("--rank", dist->rank, "this process's rank in a job across machines");
  app.add_option("--world-size", dist->world_size,
                 "number of processes in the job, " + range_text(1, kMaxWorldSize));
  app.add_option("--master", dist->master,
                 "HOST:PORT of the job's store (rank 0 hosts it when there is no launcher)");
  app.add_option("--timeout", dist->timeout_seconds,
                 "seconds a collective may wait for a rank before the job ends naming it, " +
                     range_text(1, kMaxTimeoutSeconds))
      ->capture_default_str();
}

int launch_if_asked(const CLI::App& app, int argc, char** argv, DistOptions& dist,
                    int threads) {
  dist.ranks_by_hand = app.count("--rank") || app.count("--world-size") || app.count("--master");
  dist.validate();  // --nproc with any of those refused
  if (dist.nproc == 0) return -1;
  if (dist.nproc == 1) return -1;  // one worker: no launcher, no group
  // The workers get this tool's arguments without --nproc and --threads (the launcher adds
  // --threads per worker, --rank, --world-size and --master).
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc" || a == "--threads") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0 || a.rfind("--threads=", 0) == 0) continue;
    args.push_back(a);
  }
  LaunchOptions lo;
  lo.tool = app.get_name();
  lo.nproc = dist.nproc;
  lo.threads = threads;
  lo.timeout_seconds = dist.timeout_seconds;
  // Asynchronous training goes on without a lost worker; only its servers are essential.
  if (dist.sync.kind == Sync::Kind::kAsync) lo.essential_ranks = dist.servers;
  return launch_local_workers(lo, args);
}

std::string json_with_omp_wait(const std::string& report_json) {
  nlohmann::json j = nlohmann::json::parse(report_json);
  const OmpWaitChoice choice = omp_wait_choice();
  j["omp_wait"] = {{"policy", choice.policy}, {"why", choice.why}};
  return j.dump();
}

}  // namespace recycle
