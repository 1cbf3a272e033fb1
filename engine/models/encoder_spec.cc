#include "engine/models/encoder_spec.h"

#include <sstream>
#include <stdexcept>
#include <vector>

namespace recycle {

std::string EncoderSpec::to_string() const {
  std::vector<std::string> items;
  if (!file.empty()) items.push_back(file);
  if (!digest.empty()) items.push_back("xxh3=" + digest);
  for (const auto& [n, v] : options) items.push_back(n + "=" + std::to_string(v));
  std::string s = name;
  for (size_t i = 0; i < items.size(); ++i) s += (i == 0 ? ":" : ",") + items[i];
  return s;
}

bool EncoderSpec::has(const std::string& option) const {
  for (const auto& [n, v] : options) {
    if (n == option) return true;
  }
  return false;
}

int64_t EncoderSpec::get(const std::string& option) const {
  for (const auto& [n, v] : options) {
    if (n == option) return v;
  }
  throw std::invalid_argument("model " + to_string() + " has no option '" + option + "'");
}

void EncoderSpec::set(const std::string& option, int64_t value) {
  for (auto& [n, v] : options) {
    if (n == option) {
      v = value;
      return;
    }
  }
  throw std::invalid_argument("model " + name + " has no option '" + option + "'");
}

EncoderSpec EncoderSpec::parse(const std::string& text) {
  EncoderSpec spec;
  const size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (spec.name.empty()) throw std::invalid_argument("model spec '" + text + "' has no name");
  if (colon == std::string::npos) return spec;
  std::stringstream in(text.substr(colon + 1));
  std::string item;
  bool first = true;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (first && eq == std::string::npos && !item.empty()) {
      spec.file = item;  // "NAME:FILE[,...]"
      first = false;
      continue;
    }
    first = false;
    if (name == "xxh3") {
      if (!spec.digest.empty()) {
        throw std::invalid_argument("model spec '" + text + "': xxh3 is given twice");
      }
      spec.digest = item.substr(eq + 1);
      if (spec.digest.empty()) {
        throw std::invalid_argument("model spec '" + text + "': xxh3 is empty");
      }
      continue;
    }
    int64_t value = 0;
    try {
      size_t used = 0;
      value = std::stoll(eq == std::string::npos ? "" : item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw std::invalid_argument("model spec '" + text + "': '" + item + "' is not name=integer");
    }
    if (name.empty()) {
      throw std::invalid_argument("model spec '" + text + "': an option has no name");
    }
    if (spec.has(name)) {
      throw std::invalid_argument("model spec '" + text + "': " + name + " is given twice");
    }
    spec.options.emplace_back(name, value);
  }
  return spec;
}

}  // namespace recycle
