// DistOptions (how one process takes part in a data-parallel job) lives in
// include/recycle/options.h; here, the parsing of --master. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/options.h"

namespace recycle {

// Parses "HOST:PORT" (PORT 1..65535; HOST may be [IPv6]). Throws std::invalid_argument naming
// the flag.
void parse_master(const std::string& master, std::string* host, int* port);

}  // namespace recycle
