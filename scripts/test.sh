#!/usr/bin/env bash
# Installs what is missing, builds everything (the micro benchmarks too, and the Python package
# when /usr/bin/python3 has torch and pybind11), installs the Python package, and runs the whole
# test suite under ctest (its pytest suite as the entry python_tests), against Debian's LibTorch
# 1.13. Then, when PyPI is reachable (or its venv exists), the whole suite again against PyPI's
# torch 2.11 in a venv (scripts/test_torch2.sh; RECYCLE_SKIP_TORCH2=1 skips it). Prints the time
# of each part.
# Usage: scripts/test.sh            (build directories: build/ and build-torch2/, reused when present)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup.sh
# The compiler cache (ccache, kept in ~/.cache/ccache between runs on one machine; CMakeLists.txt
# compiles through it): room for both LibTorch trees' objects.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
ccache --zero-stats >/dev/null 2>&1 || true
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRECYCLE_BUILD_TESTS=ON -DRECYCLE_BUILD_BENCH=ON \
  -DRECYCLE_BUILD_PYTHON="$(bash scripts/python_found.sh)" >/dev/null
cmake --build build -j "$(nproc)"
bash scripts/install_python.sh build
# Two tests at a time, each with LibTorch's OpenMP threads: waiting threads sleep instead of
# spinning, or a test beside a busy one runs several times slower (docs/performance.md).
(cd build && OMP_WAIT_POLICY=PASSIVE ctest --output-on-failure -j 2 --timeout 900)
debian_done=$(date +%s)
echo "test.sh: LibTorch 1.13 (Debian): build and ctest took $((debian_done - start)) s"
if [ "${RECYCLE_SKIP_TORCH2:-0}" = 1 ]; then
  echo "test.sh: LibTorch 2.11 (pip): skipped (RECYCLE_SKIP_TORCH2=1)"
  exit 0
fi
bash scripts/test_torch2.sh build-torch2
echo "test.sh: LibTorch 2.11 (pip): venv, build, pip install and ctest took $(( $(date +%s) - debian_done )) s"
echo "test.sh: compiler cache: $(ccache --print-stats 2>/dev/null | awk -F'\t' '$1=="direct_cache_hit"||$1=="preprocessed_cache_hit"{h+=$2} $1=="cache_miss"{m=$2} END{printf "%d hits, %d misses", h, m}')"
