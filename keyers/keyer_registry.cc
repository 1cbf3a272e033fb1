#include "recycle/keyer.h"

#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "base/strings.h"
#include "keyers/id_keyer.h"
#include "keyers/text_keyer.h"
#include "keyers/xxh3_keyer.h"

namespace recycle {

namespace {

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

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

// Guarded by registry_mutex().
std::map<std::string, KeyerFactory>& factories() {
  static std::map<std::string, KeyerFactory> map = {
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

std::string known_keyers() { return join(keyer_names(), ", "); }

}  // namespace

std::unique_ptr<Keyer> make_keyer(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string args = colon == std::string::npos ? "" : spec.substr(colon + 1);
  KeyerFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = factories().find(name);
    if (it != factories().end()) factory = it->second;
  }
  if (!factory) {
    throw std::invalid_argument("unknown keyer '" + spec + "' (known: " + known_keyers() + ")");
  }
  try {
    return factory(args);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("bad keyer spec '" + spec + "': " + e.what() + " (known: " +
                                known_keyers() + "; text takes space and lower)");
  }
}

std::string default_keyer_spec(bool text_data) { return text_data ? "text" : "xxh3"; }

void register_keyer(const std::string& name, KeyerFactory factory) {
  const bool plain = !name.empty() && name.find_first_of(":,") == std::string::npos;
  if (!plain || !factory) {
    throw std::invalid_argument("a keyer needs a name without ':' or ',' and a factory");
  }
  std::lock_guard<std::mutex> lock(registry_mutex());
  if (!factories().emplace(name, std::move(factory)).second) {
    throw std::invalid_argument("a keyer named '" + name + "' is already registered");
  }
}

std::vector<std::string> keyer_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories()) names.push_back(name);
  return names;
}

}  // namespace recycle
