#include "engine/models/device.h"

#include <dlfcn.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cctype>

#include "base/strings.h"
#include "recycle/errors.h"
#include "recycle/reader.h"  // usable_device_name

namespace recycle {

namespace {

// Whether this process runs a LibTorch with CUDA: pip's links libtorch_cuda.so into every
// program built against it (and torch's Python loads it); Debian's has none. A program built
// without it cannot reach a GPU whatever the machine has.
bool libtorch_has_cuda() {
  void* lib = ::dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
  if (lib != nullptr) ::dlclose(lib);
  return lib != nullptr;
}

}  // namespace

c10::Device usable_device(const std::string& name, const std::string& option) {
  const std::string flag = option + " " + printable(name);  // one line whatever was typed
  if (name == "cpu") return c10::Device(c10::kCPU);
  const std::string digits = name.size() > 5 ? name.substr(5) : "";
  const bool indexed = name.rfind("cuda:", 0) == 0 && !digits.empty() && digits.size() <= 3 &&
                       std::all_of(digits.begin(), digits.end(),
                                   [](unsigned char c) { return std::isdigit(c) != 0; });
  if (name != "cuda" && !indexed) {
    throw InvalidArgument(flag + ": expected cpu, cuda or cuda:N");
  }
  if (!libtorch_has_cuda()) {
    throw InvalidArgument(
        flag +
        ": this program's LibTorch has no CUDA (Debian's LibTorch 1.13 is "
        "CPU-only; build recycle against pip's torch in a venv: docs/pytorch2.md)");
  }
  const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
  if (gpus == 0) {
    throw InvalidArgument(flag + ": no GPU is usable by this process (no NVIDIA driver, or "
                          "CUDA_VISIBLE_DEVICES hides them: see nvidia-smi)");
  }
  const int64_t index = indexed ? std::stoll(digits) : 0;
  if (index >= gpus) {
    throw InvalidArgument(flag + ": this machine has " + std::to_string(gpus) +
                          " GPU(s): cuda:0 to cuda:" + std::to_string(gpus - 1));
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::string usable_device_name(const std::string& name, const std::string& option) {
  usable_device(name, option);
  return name;
}

}  // namespace recycle
