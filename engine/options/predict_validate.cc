// PredictOptions::validate (include/recycle/predict.h) and the checks of --out that run_predict
// uses too (engine/options/predict_output.h). Compiled into the jobs/ room (recycle_jobs).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "base/range_check.h"
#include "engine/data/data_source.h"  // parse_data_spec
#include "engine/options/predict_output.h"
#include "recycle/errors.h"
#include "recycle/predict.h"

namespace recycle {

namespace {

namespace fs = std::filesystem;

bool ends_with_lower(const std::string& path, const std::string& suffix) {
  if (path.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    const char c = path[path.size() - suffix.size() + i];
    if (std::tolower(static_cast<unsigned char>(c)) != suffix[i]) return false;
  }
  return true;
}

}  // namespace

OutputFormat output_format(const std::string& path) {
  if (ends_with_lower(path, ".jsonl")) return OutputFormat::kJsonl;
  if (ends_with_lower(path, ".csv")) return OutputFormat::kCsv;
  throw InvalidArgument("--out " + path + ": the file must end in .jsonl or .csv");
}

std::string output_target(const PredictOptions& o) {
  fs::path out = o.out;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(out, ec)); ++hops) {
    const fs::path link = fs::read_symlink(out, ec);
    if (ec) break;
    out = link.is_absolute() ? link : out.parent_path() / link;
  }
  const fs::path canonical = fs::weakly_canonical(out, ec);
  const fs::path target = ec ? out : canonical;
  auto is = [&](const std::string& input) {
    std::error_code e;
    return !input.empty() && fs::exists(input, e) && fs::exists(target, e) &&
           fs::equivalent(target, input, e);
  };
  const std::string why = " (the rows would replace what this run reads): give another --out";
  if (is(o.head)) throw InvalidArgument("--out " + o.out + " is the --head file" + why);
  if (is(o.weights)) throw InvalidArgument("--out " + o.out + " is the --weights file" + why);
  const std::optional<DataSpec> data = parse_data_spec(o.data.spec);
  if (data && is(data->path)) {
    throw InvalidArgument("--out " + o.out + " is the --data file" + why);
  }
  std::error_code e;
  const fs::path cache = fs::weakly_canonical(o.cache_dir, e);
  if (!e) {
    const auto [c, t] = std::mismatch(cache.begin(), cache.end(), target.begin(), target.end());
    if (c == cache.end()) {
      throw InvalidArgument("--out " + o.out + " is inside the cache " + o.cache_dir +
                            ": give an --out outside it");
    }
  }
  return target.string();
}

void PredictOptions::validate() const {
  auto need = [](const std::string& value, const char* flag) {
    if (value.empty()) throw InvalidArgument(std::string(flag) + " is required");
  };
  need(cache_dir, "--cache DIR");
  need(head, "--head FILE");
  need(data.spec, "--data SPEC");
  need(out, "--out FILE.jsonl|FILE.csv");
  data.validate();
  output_format(out);  // throws for another extension
  output_target(*this);  // throws for an output that is an input or inside the cache
  check_range("--batch", batch, int64_t{1}, kMaxBatch);
  check_at_least("--top-k", top_k, int64_t{0});  // 0: every class
  check_range("--threads", threads, 0, kMaxThreads);
}

}  // namespace recycle
