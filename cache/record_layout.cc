#include "cache/record_layout.h"

#include <limits>
#include <set>

#include "cache/codec.h"

namespace recycle {

RecordLayout layout_from_shapes(const std::vector<std::vector<int64_t>>& shapes, Codec codec) {
  RecordLayout layout;
  for (size_t i = 0; i < shapes.size(); ++i) {
    layout.push_back(
        {i == 0 ? "activation" : "tensor" + std::to_string(i), Dtype::kFloat32, shapes[i], codec});
  }
  return layout;
}

std::vector<std::vector<int64_t>> layout_shapes(const RecordLayout& layout) {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorLayout& t : layout) shapes.push_back(t.shape);
  return shapes;
}

Status check_layout(const RecordLayout& layout) {
  if (layout.size() > 255) {
    return Status::invalid_argument("record layout of " + std::to_string(layout.size()) +
                                    " tensors; a record holds at most 255");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < layout.size(); ++i) {
    const TensorLayout& t = layout[i];
    const std::string which = "record layout tensor " + std::to_string(i) + " (" + t.name + ")";
    if (t.name.empty()) return Status::invalid_argument(which + " has no name");
    if (!names.insert(t.name).second) return Status::invalid_argument(which + ": name repeated");
    if (t.shape.size() > 8) return Status::invalid_argument(which + ": rank over 8");
    for (int64_t d : t.shape) {
      if (d != kVariableDim && (d < 1 || d > std::numeric_limits<int32_t>::max())) {
        return Status::invalid_argument(which + ": dimension " + std::to_string(d) +
                                        " is neither in [1, 2^31) nor -1 (variable)");
      }
    }
  }
  return Status();
}

Status check_record_layout(const std::vector<RecordTensor>& tensors, const RecordLayout& layout) {
  if (tensors.size() != layout.size()) {
    return Status::corruption("record holds " + std::to_string(tensors.size()) +
                              " tensors, the layout has " + std::to_string(layout.size()));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const RecordTensor& t = tensors[i];
    const TensorLayout& want = layout[i];
    const std::string which = "record tensor " + std::to_string(i) + " (" + want.name + ")";
    if (t.dtype != want.dtype) {
      return Status::corruption(which + " is " + dtype_name(t.dtype) + ", the layout says " +
                                dtype_name(want.dtype));
    }
    bool fits = t.shape.size() == want.shape.size();
    for (size_t d = 0; fits && d < t.shape.size(); ++d) {
      fits = want.shape[d] == kVariableDim || want.shape[d] == t.shape[d];
    }
    if (!fits) {
      return Status::corruption(which + " has shape " + shape_string(t.shape) +
                                ", the layout says " + shape_string(want.shape));
    }
    if (t.dtype == Dtype::kFloat32 && t.codec != want.codec) {
      return Status::corruption(which + " is stored as " + codec_name(t.codec) +
                                ", the layout says " + codec_name(want.codec));
    }
  }
  return Status();
}

std::string layout_string(const RecordLayout& layout) {
  if (layout.empty()) return "no tensors";
  std::string s;
  for (size_t i = 0; i < layout.size(); ++i) {
    const TensorLayout& t = layout[i];
    s += (i ? " + " : "") + t.name + " " + dtype_name(t.dtype) + " " + shape_string(t.shape) + " " +
         t.codec_word();
  }
  return s;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? "x" : "") + (shape[i] == kVariableDim ? std::string("?") : std::to_string(shape[i]));
  }
  return s.empty() ? "()" : s;
}

}  // namespace recycle
