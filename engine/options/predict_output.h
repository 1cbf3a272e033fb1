// recycle-predict's --out, checked by PredictOptions::validate (engine/options/predict_validate.cc)
// and written by run_predict (engine/jobs/predict_job.cc): its format and the file it names.
#pragma once

#include <string>

namespace recycle {

struct PredictOptions;

enum class OutputFormat { kJsonl, kCsv };
// By the extension: .jsonl or .csv (any case). Throws InvalidArgument naming --out.
OutputFormat output_format(const std::string& path);

// Where --out is written: through a symbolic link (a chain of them) to its target, as cp and a
// shell's > do, so the link stays. Throws InvalidArgument, naming the flag, for an output that is
// one of the run's input files (--head, --weights, a --data file), the --data directory or inside
// the cache: the rows would replace what the run reads. Paths are compared as files
// (fs::equivalent) where they exist, and by their canonical form otherwise.
std::string output_target(const PredictOptions& o);

}  // namespace recycle
