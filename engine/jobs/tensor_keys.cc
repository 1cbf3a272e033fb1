#include "engine/jobs/tensor_keys.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "engine/util/parallel_loop.h"
#include "recycle/content_hasher.h"
#include "recycle/errors.h"

namespace recycle {

namespace {

// The dtype names rows are keyed with (part of every key: a float32 and a float64 input of
// equal values are different inputs).
std::string key_dtype_name(c10::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return "float32";
    case torch::kFloat64: return "float64";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kInt64: return "int64";
    case torch::kInt32: return "int32";
    case torch::kInt16: return "int16";
    case torch::kInt8: return "int8";
    case torch::kUInt8: return "uint8";
    case torch::kBool: return "bool";
    default: break;
  }
  throw InvalidArgument(std::string("inputs of dtype ") + c10::toString(t) +
                        " cannot be keyed (use a real or integer dtype)");
}

}  // namespace

void key_rows(const Keyer& keyer, const at::Tensor& inputs, int64_t first_id,
              std::vector<Key>* keys) {
  const int64_t n = inputs.size(0);
  const std::string dtype = key_dtype_name(inputs.scalar_type());
  const std::vector<int64_t> row_shape = inputs.sizes().slice(1).vec();
  const std::vector<int64_t> strides = TensorView::contiguous_strides(row_shape);
  const int64_t row_bytes = n > 0 ? static_cast<int64_t>(inputs.nbytes()) / n : 0;
  const char* base = static_cast<const char*>(inputs.data_ptr());
  keys->assign(static_cast<size_t>(n), Key());
  parallel_loop(n, [&](int64_t i) {
    TensorView view;
    view.dtype = dtype;
    view.shape = row_shape;
    view.strides = strides;
    view.data = base + i * row_bytes;
    view.element_size = static_cast<size_t>(inputs.element_size());
    const std::string id = std::to_string(first_id + i);
    KeyInput in;
    in.tensor = &view;
    in.id = id;
    in.has_id = true;
    (*keys)[i] = keyer.key(in);
  });
}

void key_texts(const Keyer& keyer, const std::vector<std::string>& texts, int64_t first_id,
               std::vector<Key>* keys) {
  const int64_t n = static_cast<int64_t>(texts.size());
  keys->assign(static_cast<size_t>(n), Key());
  for (int64_t i = 0; i < n; ++i) {
    const std::string id = std::to_string(first_id + i);
    KeyInput in;
    in.text = texts[static_cast<size_t>(i)];
    in.has_text = true;
    in.id = id;
    in.has_id = true;
    try {
      (*keys)[static_cast<size_t>(i)] = keyer.key(in);
    } catch (const std::invalid_argument&) {
      throw InvalidArgument("keyer '" + keyer.spec() +
                            "' does not key texts: use keyer=\"text\" (or \"id\")");
    }
  }
}

void key_named(const Keyer& keyer, const std::vector<std::map<std::string, at::Tensor>>& samples,
               int64_t first_id, std::vector<Key>* keys) {
  const int64_t n = static_cast<int64_t>(samples.size());
  keys->assign(static_cast<size_t>(n), Key());
  const std::string spec = keyer.spec();
  if (spec != "xxh3" && spec != "id") {
    throw InvalidArgument("keyer '" + spec +
                          "' does not key named tensors: use keyer=\"tensor\" (xxh3) or \"id\"");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (spec == "id") {
      const std::string id = std::to_string(first_id + i);
      KeyInput in;
      in.id = id;
      in.has_id = true;
      (*keys)[static_cast<size_t>(i)] = keyer.key(in);
      continue;
    }
    ContentHasher hasher;
    for (const auto& [name, tensor] : samples[static_cast<size_t>(i)]) {
      const torch::Tensor c = tensor.detach().to(torch::kCPU).contiguous();
      TensorView view;
      view.dtype = key_dtype_name(c.scalar_type());
      view.shape = c.sizes().vec();
      view.strides = c.strides().vec();
      view.data = c.data_ptr();
      view.element_size = static_cast<size_t>(c.element_size());
      hasher.update_field(name);
      hasher.update_tensor(view);
    }
    (*keys)[static_cast<size_t>(i)] = hasher.digest();
  }
}

}  // namespace recycle
