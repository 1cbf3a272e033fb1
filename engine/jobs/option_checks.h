// Checks of options that live with the code they share file-private helpers with, for the
// validate() of their structs (engine/options/*_validate.cc, the one home of every options
// struct's validate()). Each throws InvalidArgument (errors.h) with one line naming the option.
// And what a validate() builds that its struct's user needs too.
#pragma once

#include "cache/record_layout.h"  // RecordLayout

namespace recycle {

struct PredictOptions;
struct WriterOptions;

// --out: FILE.jsonl or FILE.csv, not one of the run's inputs nor inside the cache (follows
// links). Defined in engine/jobs/predict_job.cc, beside run_predict's output_target.
void check_predict_output(const PredictOptions& o);

// The record layout WriterOptions' tensors make (float32 ones stored with its codec, the others
// raw), unchecked: WriterOptions::validate checks it. Defined in engine/options/writer_validate.cc.
RecordLayout writer_record_layout(const WriterOptions& o);

}  // namespace recycle
