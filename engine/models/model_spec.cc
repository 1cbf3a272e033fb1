#include "engine/models/model_spec.h"

#include <sstream>
#include <stdexcept>

namespace recycle {

std::string ModelSpec::to_string() const {
  return arch + ":width=" + std::to_string(width) + ",in_channels=" + std::to_string(in_channels);
}

ModelSpec ModelSpec::parse(const std::string& text) {
  ModelSpec spec;
  const size_t colon = text.find(':');
  spec.arch = text.substr(0, colon);
  if (spec.arch != "resnet18") {
    throw std::invalid_argument("unknown model '" + spec.arch + "' (known: resnet18)");
  }
  if (colon == std::string::npos) return spec;
  std::stringstream in(text.substr(colon + 1));
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    int64_t value = 0;
    try {
      size_t used = 0;
      value = std::stoll(eq == std::string::npos ? "" : item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw std::invalid_argument("model spec '" + text + "': '" + item + "' is not name=integer");
    }
    if (value < 1 || value > 4096) {
      throw std::invalid_argument("model spec '" + text + "': " + name + " must be 1..4096");
    }
    if (name == "width") {
      spec.width = value;
    } else if (name == "in_channels") {
      spec.in_channels = value;
    } else {
      throw std::invalid_argument("model spec '" + text + "': unknown option '" + name + "'");
    }
  }
  return spec;
}

}  // namespace recycle
