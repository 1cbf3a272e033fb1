#include "engine/util/heap_tuning.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace recycle {

void keep_freed_blocks_for_reuse() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
      (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr)) {
    return;
  }
  constexpr int kMmapThreshold = 32 << 20;  // glibc's largest allowed value on 64-bit
  constexpr int kTrimThreshold = 128 << 20;
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
#endif
}

}  // namespace recycle
