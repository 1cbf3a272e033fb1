#!/usr/bin/env bash
# Installs what is missing, builds everything (the micro benchmarks too) and runs the whole test
# suite under ctest.
# Usage: scripts/test.sh            (build directory: build/, reused when present)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRECYCLE_BUILD_TESTS=ON -DRECYCLE_BUILD_BENCH=ON >/dev/null
cmake --build build -j "$(nproc)"
cd build
# Two tests at a time, each with LibTorch's OpenMP threads: waiting threads sleep instead of
# spinning, or a test beside a busy one runs several times slower (docs/performance.md).
export OMP_WAIT_POLICY=PASSIVE
ctest --output-on-failure -j 2 --timeout 900
