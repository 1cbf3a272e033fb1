// Tensor files: what the tools write for themselves (weights, heads, checkpoints, a cache's head
// blob) as named tensors and string metadata in the safetensors format
// (https://github.com/huggingface/safetensors: an 8-byte little-endian header size, a JSON
// header naming each tensor's dtype, shape and byte range, then the raw bytes). Reading one
// parses JSON and copies bytes: it runs nothing, whatever the file holds (a TorchScript archive,
// what these files were before, runs the code of any class it holds when loaded). Python reads
// them with safetensors.torch.load_file. The metadata holds the XXH3-128 of the tensors' bytes
// ("recycle.data_xxh3"), checked on reading: a flipped byte is refused as damage.
//
// Thread safety: the functions share no state. Tensors are CPU tensors.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

namespace recycle {

struct TensorFile {
  std::map<std::string, torch::Tensor> tensors;   // name -> tensor (any supported dtype)
  std::map<std::string, std::string> metadata;    // the header's "__metadata__"
};

// The file's bytes. Tensors are written contiguous, on the CPU; dtypes float64/32/16, bfloat16,
// int64/32/16/8, uint8 and bool. Throws std::invalid_argument for another dtype.
std::string to_safetensors(const TensorFile& file);
// Parses bytes written by to_safetensors (or by safetensors itself). `what` names the bytes in
// errors ("weights FILE"). Throws std::runtime_error with one line: an older recycle's file (a
// TorchScript archive: is_torch_archive) is refused, saying how to convert it; anything else
// that is not a whole safetensors file is "damaged" or "not a ... file".
TensorFile from_safetensors(const std::string& bytes, const std::string& what);

// Writes `file` to `path` atomically (engine/util/atomic_file.h). Throws std::runtime_error
// "cannot write PATH: why".
void save_tensor_file(const TensorFile& file, const std::string& path);
// Reads a regular file (engine/data/regular_file.h) and parses it as from_safetensors does.
TensorFile load_tensor_file(const std::string& path, const std::string& what);

// True for bytes that are a zip (a torch::serialize or TorchScript archive).
bool is_torch_archive(const std::string& bytes);
// The line that refuses such a file (`what` names it): how to convert one that is trusted.
std::string old_format_message(const std::string& what);

// A module's parameters and buffers under their names (named_parameters / named_buffers),
// each with `prefix` before it, into file->tensors (detached CPU copies).
void add_module_state(const torch::nn::Module& module, TensorFile* file,
                      const std::string& prefix = "");
// Copies the tensors named as add_module_state names them into the module's parameters and
// buffers (values only: the module keeps its storage, device and dtype). Throws
// std::runtime_error naming `what` for a missing tensor or one of another shape.
void load_module_state(torch::nn::Module& module, const TensorFile& file, const std::string& what,
                       const std::string& prefix = "");

}  // namespace recycle
