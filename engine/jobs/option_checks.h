// Checks of options that live with the code they share file-private helpers with, for the
// validate() of their structs (engine/options/*_validate.cc, the one home of every options
// struct's validate()). Each throws InvalidArgument (errors.h) with one line naming the option.
#pragma once

namespace recycle {

struct PredictOptions;
struct WriterOptions;

// --out: FILE.jsonl or FILE.csv, not one of the run's inputs nor inside the cache (follows
// links). Defined in engine/jobs/predict_job.cc, beside run_predict's output_target.
void check_predict_output(const PredictOptions& o);

// Everything parse_options of engine/jobs/cache_writer.cc checks (the cache directory, the
// samples, the model, flush_seconds, the split's name, the codec, the compression, the keyer,
// the layout, an engine model's needs); what CacheWriter starts with. Reads no file.
void check_writer_options(const WriterOptions& o);

}  // namespace recycle
