#include "engine/models/tensor_file.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/data/regular_file.h"
#include "engine/util/atomic_file.h"
#include "recycle/content_hasher.h"

namespace recycle {

namespace {

using json = nlohmann::json;

const std::vector<std::pair<const char*, torch::Dtype>>& dtype_names() {
  static const std::vector<std::pair<const char*, torch::Dtype>> names = {
      {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
      {"BF16", torch::kBFloat16}, {"I64", torch::kInt64}, {"I32", torch::kInt32},
      {"I16", torch::kInt16}, {"I8", torch::kInt8}, {"U8", torch::kUInt8},
      {"BOOL", torch::kBool}};
  return names;
}

std::string dtype_name(torch::Dtype dtype) {
  for (const auto& [name, d] : dtype_names()) {
    if (d == dtype) return name;
  }
  throw std::invalid_argument(std::string("a tensor file cannot hold dtype ") +
                              c10::toString(dtype));
}

// Throws for a name safetensors does not know.
torch::Dtype dtype_of(const std::string& name, const std::string& what) {
  for (const auto& [n, d] : dtype_names()) {
    if (name == n) return d;
  }
  throw std::runtime_error(what + " is damaged: a tensor of unknown dtype '" + name + "'");
}

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // safetensors' own limit

// The metadata entry that holds the XXH3-128 of the data section (every tensor's bytes): what
// tells a flipped byte in a file recycle wrote (safetensors has no checksum of its own). Files of
// other writers, without it, are read unchecked.
constexpr const char* kDigestEntry = "recycle.data_xxh3";

}  // namespace

bool is_torch_archive(const std::string& bytes) { return bytes.rfind("PK\x03\x04", 0) == 0; }

std::string old_format_message(const std::string& what) {
  return what + " is in the format of an older recycle (a TorchScript archive, whose loading "
                "runs any code it holds), which this version does not load: if you trust it, "
                "convert it once with recycle-inspect --convert-old FILE --to NEW";
}

std::string to_safetensors(const TensorFile& file) {
  json header = json::object();
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = c.numel() * c.element_size();
    header[name] = {{"dtype", dtype_name(c.scalar_type())},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  std::string data_bytes;
  data_bytes.reserve(offset);
  for (const torch::Tensor& c : data) {
    data_bytes.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  }
  std::map<std::string, std::string> metadata = file.metadata;
  metadata[kDigestEntry] = hash128(data_bytes).to_hex();
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += text;
  out += data_bytes;
  return out;
}

TensorFile from_safetensors(const std::string& bytes, const std::string& what) {
  if (is_torch_archive(bytes)) throw std::runtime_error(old_format_message(what));
  auto damaged = [&](const std::string& why) {
    return std::runtime_error(what + " is not a tensor file recycle wrote, or is damaged: " + why);
  };
  if (bytes.size() < 8) throw damaged("shorter than its header");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) throw damaged("its header runs past its end");
  json header;
  try {
    header = json::parse(bytes.substr(8, n));
  } catch (const json::exception&) {
    throw damaged("its header is not JSON");
  }
  if (!header.is_object()) throw damaged("its header is not a JSON object");
  const uint64_t data_begin = 8 + n, data_bytes = bytes.size() - data_begin;
  if (header.contains("__metadata__") && header["__metadata__"].is_object() &&
      header["__metadata__"].contains(kDigestEntry)) {
    const nlohmann::json& want = header["__metadata__"][kDigestEntry];
    if (!want.is_string() ||
        want.get<std::string>() !=
            hash128(std::string_view(bytes).substr(data_begin)).to_hex()) {
      throw damaged("its tensors' bytes fail their XXH3-128 check");
    }
  }
  TensorFile file;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        file.metadata = entry.get<std::map<std::string, std::string>>();
        file.metadata.erase(kDigestEntry);
        continue;
      }
      const torch::Dtype dtype = dtype_of(entry.at("dtype").get<std::string>(), what);
      const std::vector<int64_t> shape = entry.at("shape").get<std::vector<int64_t>>();
      const std::vector<uint64_t> range = entry.at("data_offsets").get<std::vector<uint64_t>>();
      uint64_t numel = 1;
      for (const int64_t d : shape) {
        if (d < 0 || (d > 0 && numel > std::numeric_limits<uint64_t>::max() / 2 / d)) {
          throw damaged("tensor " + name + " has a bad shape");
        }
        numel *= static_cast<uint64_t>(d);
      }
      const uint64_t size = numel * torch::elementSize(dtype);
      if (range.size() != 2 || range[0] > range[1] || range[1] > data_bytes ||
          range[1] - range[0] != size) {
        throw damaged("tensor " + name + "'s bytes are out of range");
      }
      torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
      if (size > 0) std::memcpy(t.data_ptr(), bytes.data() + data_begin + range[0], size);
      file.tensors.emplace(name, std::move(t));
    }
  } catch (const json::exception& e) {
    throw damaged(std::string("its header is not a tensor file's (") + e.what() + ")");
  }
  return file;
}

void save_tensor_file(const TensorFile& file, const std::string& path) {
  const std::string bytes = to_safetensors(file);
  write_file_atomically(path, [&](const std::string& temp) {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path);
  });
}

TensorFile load_tensor_file(const std::string& path, const std::string& what) {
  return from_safetensors(read_regular_file(path), what);
}

void add_module_state(const torch::nn::Module& module, TensorFile* file,
                      const std::string& prefix) {
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    file->tensors[prefix + p.key()] = p.value().detach().to(torch::kCPU).clone();
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    file->tensors[prefix + b.key()] = b.value().detach().to(torch::kCPU).clone();
  }
}

void load_module_state(torch::nn::Module& module, const TensorFile& file, const std::string& what,
                       const std::string& prefix) {
  torch::NoGradGuard no_grad;
  auto load = [&](const std::string& name, torch::Tensor target) {
    const auto it = file.tensors.find(prefix + name);
    if (it == file.tensors.end()) {
      throw std::runtime_error(what + " holds no tensor " + prefix + name);
    }
    if (it->second.sizes() != target.sizes()) {
      throw std::runtime_error(what + " holds " + prefix + name + " of shape " +
                               c10::str(it->second.sizes()) + ", the model's is " +
                               c10::str(target.sizes()));
    }
    target.copy_(it->second);
  };
  for (auto& p : module.named_parameters(/*recurse=*/true)) load(p.key(), p.value());
  for (auto& b : module.named_buffers(/*recurse=*/true)) load(b.key(), b.value());
}

}  // namespace recycle
