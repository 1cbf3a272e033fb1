// Force-included (clang -include) into cache/codec.cc by scripts/fuzz.sh, only when the clang
// in use rejects __builtin_cpu_supports("f16c") (clang 14 does; gcc and clang >= 15 accept
// it). Answers the two features codec.cc asks about from CPUID and XGETBV, as gcc's runtime
// does, so the fuzzed codec takes the same F16C path as the real build.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#include <cstring>

namespace recycle_fuzz_compat {

inline bool cpu_supports(const char* feature) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool osxsave = ecx & (1u << 27);
  bool ymm_enabled = false;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    ymm_enabled = (lo & 6) == 6;  // the OS saves XMM and YMM state
  }
  const bool avx = (ecx & (1u << 28)) && ymm_enabled;
  if (std::strcmp(feature, "avx") == 0) return avx;
  if (std::strcmp(feature, "f16c") == 0) return avx && (ecx & (1u << 29));
  return false;
}

}  // namespace recycle_fuzz_compat

#define __builtin_cpu_supports(feature) ::recycle_fuzz_compat::cpu_supports(feature)
#endif
