// The rows recycle-predict writes, one per sample, as JSONL or CSV (chosen by the output file's
// extension). Columns / keys, in order:
//   row    the sample's position in the split (after --classes and --limit)
//   id     its source: "SPLIT/POSITION" for IDX files, the file or line it came from otherwise
//   label  its class id in the data; pred: the predicted class id; class: its name
//   hit    true when its activation came from the cache, false when the prefix ran
//   probs  every class's probability in class order (CSV: one column p_NAME per class), or with
//          top_k > 0, "top": [[class, probability], ...] most probable first (CSV: top1, p1,
//          top2, p2, ...)
// Probabilities are printed with 6 significant digits. Not thread safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/options/predict_output.h"  // OutputFormat

namespace recycle {

class RowWriter {
 public:
  // Writes the CSV header at once. `out` must outlive this.
  RowWriter(std::ostream& out, OutputFormat format, std::vector<std::string> class_names,
            int64_t top_k);
  // The rows of samples first .. first + n - 1 of `data`, n = probs.size(0): probs float32
  // [n, classes] on the CPU, contiguous; pred int64 [n]; the sample i's record was stored
  // (a hit) when computed[slot[i]] < 0.
  void write(int64_t first, const Dataset& data, const torch::Tensor& probs,
             const torch::Tensor& pred, const std::vector<int64_t>& slot,
             const std::vector<int64_t>& computed);

 private:
  std::ostream& out_;
  OutputFormat format_;
  std::vector<std::string> class_names_;
  int64_t top_k_;
};

}  // namespace recycle
