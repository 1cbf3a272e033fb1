// PredictOptions::validate (include/recycle/predict.h). Compiled into the jobs/ room
// (recycle_jobs): the checks of --out are run_predict's (engine/jobs/option_checks.h).
#include <string>

#include "base/range_check.h"
#include "engine/jobs/option_checks.h"
#include "recycle/errors.h"
#include "recycle/predict.h"

namespace recycle {

void PredictOptions::validate() const {
  auto need = [](const std::string& value, const char* flag) {
    if (value.empty()) throw InvalidArgument(std::string(flag) + " is required");
  };
  need(cache_dir, "--cache DIR");
  need(head, "--head FILE");
  need(data.spec, "--data SPEC");
  need(out, "--out FILE.jsonl|FILE.csv");
  data.validate();
  check_predict_output(*this);  // the extension; not an input, not inside the cache
  check_range("--batch", batch, int64_t{1}, kMaxBatch);
  check_at_least("--top-k", top_k, int64_t{0});  // 0: every class
  check_range("--threads", threads, 0, kMaxThreads);
}

}  // namespace recycle
