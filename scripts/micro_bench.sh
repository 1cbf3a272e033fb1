#!/usr/bin/env bash
# Builds and runs the micro benchmarks (bench/micro/, one Google Benchmark binary) in
# build-bench/: keyer, codecs and records, the RocksDB store, one training step, the prefix's
# forward (plain and InferencePrefix). ~1 minute.
# Usage: scripts/micro_bench.sh [Google Benchmark flags]
#   e.g. scripts/micro_bench.sh --benchmark_filter='codec|record'
#        scripts/micro_bench.sh --benchmark_format=json --benchmark_out=out/micro.json
# Exits non-zero when the configure or build fails, a benchmark fails, or none matches.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release \
  -DRECYCLE_BUILD_BENCH=ON -DRECYCLE_BUILD_TESTS=OFF >/dev/null
if [ ! -d build-bench/bench/micro ]; then
  echo "micro_bench: the root CMakeLists.txt does not add_subdirectory(bench/micro)" >&2
  exit 1
fi
cmake --build build-bench -j "$(nproc)" --target recycle_micro_bench >&2
exec build-bench/bench/micro/recycle_micro_bench "$@"
