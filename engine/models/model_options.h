// ModelOptions: which encoder to make or load. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>

namespace recycle {

struct ModelOptions {
  std::string encoder;   // encoder spec (see encoder_registry.h); "" = the default for the data
  int64_t width = 0;     // > 0: sets the encoder's width option (only without weights)
  int64_t max_tokens = 0;  // > 0: sets the encoder's max_tokens option (text; only without weights)
  std::string weights;   // a file saved by recycle-train --save-model; "" = random init
  uint64_t seed = 0;     // initialisation seed when there are no weights

  // A width only without weights. Throws std::invalid_argument with one line.
  void validate() const;
};

}  // namespace recycle
