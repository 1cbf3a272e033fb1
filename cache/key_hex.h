// key_from_hex: Key::to_hex's 32 lower-case hex digits back into a key (the cache's own notes
// that name keys in text: a pending ingest's probe, the damaged-records list).
#pragma once

#include <string_view>

#include "recycle/key.h"

namespace recycle {

// False (and *out left alone) for anything that is not 32 lower-case hex digits.
bool key_from_hex(std::string_view hex, Key* out);

}  // namespace recycle
