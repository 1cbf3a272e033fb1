// Reading the manifest's JSON fields strictly (cache/cache_identity.cc, cache/manifest.cc).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace recycle {

// An integer field of `j`: refuses a missing key, a float and a number outside int64 (a cast
// would be undefined) with nlohmann's type_error / out_of_range, which the readers turn into a
// Corruption status.
inline int64_t json_int(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) {
    throw nlohmann::json::type_error::create(
        302, std::string("field ") + key + " is not an integer", &v);
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    throw nlohmann::json::type_error::create(302, std::string("field ") + key + " is out of range",
                                             &v);
  }
  return v.get<int64_t>();
}

}  // namespace recycle
