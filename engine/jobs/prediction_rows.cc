#include "engine/jobs/prediction_rows.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>

#include "recycle/errors.h"

namespace recycle {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A CSV field: quoted (quotes doubled) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

RowWriter::RowWriter(std::ostream& out, OutputFormat format, std::vector<std::string> class_names,
                     int64_t top_k)
    : out_(out),
      format_(format),
      class_names_(std::move(class_names)),
      top_k_(std::min<int64_t>(top_k, static_cast<int64_t>(class_names_.size()))) {
  if (format_ != OutputFormat::kCsv) return;
  out_ << "row,id,label,pred,class,hit";
  if (top_k_ > 0) {
    for (int64_t k = 1; k <= top_k_; ++k) out_ << ",top" << k << ",p" << k;
  } else {
    for (const std::string& name : class_names_) out_ << "," << csv_field("p_" + name);
  }
  out_ << "\n";
}

void RowWriter::write(int64_t first, const Dataset& data, const torch::Tensor& probs,
                      const torch::Tensor& pred, const std::vector<int64_t>& slot,
                      const std::vector<int64_t>& computed) {
  const int64_t n = probs.size(0), classes = probs.size(1);
  const float* p = probs.data_ptr<float>();
  const int64_t* best = pred.data_ptr<int64_t>();
  const bool csv = format_ == OutputFormat::kCsv;
  std::vector<int64_t> order(static_cast<size_t>(classes));
  std::string line;
  for (int64_t i = 0; i < n; ++i) {
    const size_t pos = static_cast<size_t>(first + i);
    const float* row = p + i * classes;
    const bool hit = computed[slot[i]] < 0;
    const std::string& name = class_names_[best[i]];
    if (csv) {
      line = std::to_string(pos) + "," + csv_field(data.ids[pos]) + "," +
             std::to_string(data.labels[pos]) + "," + std::to_string(best[i]) + "," +
             csv_field(name) + (hit ? ",true" : ",false");
    } else {
      line = "{\"row\":" + std::to_string(pos) + ",\"id\":" + json_string(data.ids[pos]) +
             ",\"label\":" + std::to_string(data.labels[pos]) + ",\"pred\":" +
             std::to_string(best[i]) + ",\"class\":" + json_string(name) +
             (hit ? ",\"hit\":true" : ",\"hit\":false");
    }
    if (top_k_ > 0) {
      std::iota(order.begin(), order.end(), int64_t{0});
      std::partial_sort(order.begin(), order.begin() + top_k_, order.end(),
                        [&](int64_t a, int64_t b) { return row[a] > row[b]; });
      line += csv ? "" : ",\"top\":[";
      for (int64_t k = 0; k < top_k_; ++k) {
        const std::string c = std::to_string(order[k]), v = number(row[order[k]]);
        line += csv ? "," + c + "," + v : (k ? ",[" : "[") + c + "," + v + "]";
      }
      line += csv ? "" : "]";
    } else {
      line += csv ? "" : ",\"probs\":[";
      for (int64_t k = 0; k < classes; ++k) {
        line += (csv || k ? "," : "") + number(row[k]);
      }
      line += csv ? "" : "]";
    }
    line += csv ? "\n" : "}\n";
    out_ << line;
  }
}

}  // namespace recycle
