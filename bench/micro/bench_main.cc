// main() of recycle_micro_bench: Google Benchmark's usual main, but the exit status is 1 when
// a benchmark failed (recycle::bench::fail) or when no benchmark matched --benchmark_filter.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "bench/micro/bench_util.h"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (recycle::bench::g_failures > 0) {
    std::fprintf(stderr, "recycle_micro_bench: %d benchmark(s) failed\n",
                 recycle::bench::g_failures.load());
    return 1;
  }
  if (ran == 0) {
    std::fprintf(stderr, "recycle_micro_bench: no benchmark matched the filter\n");
    return 1;
  }
  return 0;
}
