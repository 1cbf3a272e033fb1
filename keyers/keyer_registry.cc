#include "keyers/keyer_registry.h"

#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>

#include "keyers/id_keyer.h"
#include "keyers/text_keyer.h"
#include "keyers/xxh3_keyer.h"

namespace recycle {

namespace {

using Factory = std::function<std::unique_ptr<Keyer>(const std::string& args)>;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}

void no_args(const std::string& name, const std::string& args) {
  if (!args.empty()) throw std::invalid_argument("keyer " + name + " takes no options");
}

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> map = {
      {"xxh3",
       [](const std::string& args) -> std::unique_ptr<Keyer> {
         no_args("xxh3", args);
         return std::make_unique<Xxh3Keyer>();
       }},
      {"id",
       [](const std::string& args) -> std::unique_ptr<Keyer> {
         no_args("id", args);
         return std::make_unique<IdKeyer>();
       }},
      {"text",
       [](const std::string& args) -> std::unique_ptr<Keyer> {
         TextKeyerOptions options;
         for (const std::string& opt : split_commas(args)) {
           if (opt.empty()) throw std::invalid_argument("keyer text: unknown option ''");
           if (opt == "space") {
             options.normalize_space = true;
           } else if (opt == "lower") {
             options.lower_case = true;
           } else {
             throw std::invalid_argument("keyer text: unknown option '" + opt +
                                         "' (known: space, lower)");
           }
         }
         return std::make_unique<TextKeyer>(options);
       }},
  };
  return map;
}

}  // namespace

std::unique_ptr<Keyer> make_keyer(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string args = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto it = factories().find(name);
  if (it == factories().end()) {
    std::string known;
    for (const auto& n : keyer_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown keyer '" + spec + "' (known: " + known + ")");
  }
  try {
    return it->second(args);
  } catch (const std::invalid_argument& e) {
    std::string known;
    for (const auto& n : keyer_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("bad keyer spec '" + spec + "': " + e.what() + " (known: " +
                                known + "; text takes space and lower)");
  }
}

std::vector<std::string> keyer_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories()) names.push_back(name);
  return names;
}

}  // namespace recycle
