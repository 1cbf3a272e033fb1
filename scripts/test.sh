#!/usr/bin/env bash
# Installs what is missing, builds everything (the micro benchmarks too, and the Python package
# when /usr/bin/python3 has torch and pybind11), installs the Python package, and runs the whole
# test suite under ctest (its pytest suite as the entry python_tests).
# Usage: scripts/test.sh            (build directory: build/, reused when present)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRECYCLE_BUILD_TESTS=ON -DRECYCLE_BUILD_BENCH=ON \
  -DRECYCLE_BUILD_PYTHON="$(bash scripts/python_found.sh)" >/dev/null
cmake --build build -j "$(nproc)"
bash scripts/install_python.sh build
cd build
# Two tests at a time, each with LibTorch's OpenMP threads: waiting threads sleep instead of
# spinning, or a test beside a busy one runs several times slower (docs/performance.md).
export OMP_WAIT_POLICY=PASSIVE
ctest --output-on-failure -j 2 --timeout 900
