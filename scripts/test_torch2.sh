#!/usr/bin/env bash
# The whole suite again, against PyPI's LibTorch 2.11 in a virtual environment (the torch users
# have): builds the engine, its tools, tests and the Python package against the venv's torch
# (torch.utils.cmake_prefix_path), makes the binary wheel a user installs (scripts/build_wheel.sh)
# and installs it into a fresh venv, then runs ctest: the C++ tests, the examples, and the pytest
# suite from that install (`import recycle` and the tools, the wheel's console scripts on the
# venv's PATH, are the wheel's; DDP under plain torchrun). When
# PyPI cannot be reached and no such venv exists, says so in one line and exits 0. Called by
# scripts/test.sh after the Debian suite.
# Usage: scripts/test_torch2.sh [BUILD]   (build directory: build-torch2/, reused when present)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-torch2}
rc=0
py=$(bash scripts/torch2_venv.sh | tail -n 1) || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "test_torch2: skipped: no PyPI, so the LibTorch 2.11 build and its tests did not run"
  exit 0
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi
prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')
# (CMake's warnings about the wheel's own libgomp.so.1 are expected: the tools load that one.)
mkdir -p "$build"
if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRECYCLE_BUILD_TESTS=ON \
     -DRECYCLE_BUILD_BENCH=ON -DRECYCLE_BUILD_PYTHON=ON -DPython_EXECUTABLE="$py" \
     -DCMAKE_PREFIX_PATH="$prefix" >"$build/configure.log" 2>&1; then
  cat "$build/configure.log" >&2
  exit 1
fi
cmake --build "$build" -j "$(nproc)"
build=$(cd "$build" && pwd)

# The wheel (built in $build, where everything is built already), installed into a fresh venv:
# its own site-packages holds only the wheel; torch and what the tests use (numpy, pytest,
# transformers) come from the torch venv through a .pth file, after it on sys.path.
wheel=$(PATH="$(dirname "$py"):$PATH" RECYCLE_BUILD_DIR="$build" bash scripts/build_wheel.sh "$build/dist" | tail -n 1)
wv="$build/wheel-venv"
rm -rf "$wv"
"$py" -m venv "$wv"
"$py" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
  >"$("$wv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/torch-venv.pth"
# torch's console script torchrun, as pip puts it beside an interpreter that has torch installed.
printf '#!/bin/sh\nexec "%s" -m torch.distributed.run "$@"\n' "$wv/bin/python" >"$wv/bin/torchrun"
chmod +x "$wv/bin/torchrun"
start=$(date +%s%N)
"$wv/bin/pip" install -q --disable-pip-version-check --no-deps --no-index "$wheel"
echo "test_torch2: pip install $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) took $(( ($(date +%s%N) - start) / 1000000 )) ms"
(cd / && "$wv/bin/python" -c "import recycle, torch; print('test_torch2: import recycle ->', recycle.__file__, 'with torch', torch.__version__)")
"$wv/bin/recycle-build" --help >/dev/null
# ctest's python_tests then run the package's tests from that install (python/CMakeLists.txt).
cmake -S . -B "$build" -DRECYCLE_PYTEST_VENV="$wv" >>"$build/configure.log" 2>&1

cd "$build"
export OMP_WAIT_POLICY=PASSIVE
# Not again here: the suites whose test files include no LibTorch, tool or engine header (the
# store, records, manifests, readers, keyers, samplers, small utilities), the micro benchmarks'
# smoke run (no LibTorch in what it times) and house_rules (a grep of the sources). They test
# code that does not change with the LibTorch it is linked with; scripts/test.sh runs them once,
# against Debian's 1.13.
once="ActivationStore|AtomicFile|Augment|CacheIdentity|CodecInt8|Coding|Csv|DatasetShards"
once+="|IdKeyer|IdxReader|IdxStream|ImageStream|Jsonl|Key|KeyPlan|KeyerRegistry|Manifest|Npy"
once+="|ParallelLoop|Progress|ReadPool|RecordFiles|RecordLayout|RegularFile|Sampler|SamplerDraws"
once+="|ShardRule"
once+="|SplitWriter|Stats|Status|StoreSealed|TemporaryFile|TextKeyer|TsvReader|Verify|ViewKey"
once+="|WorkQueue|Xxh3Keyer|GroupedByLength"
ctest --output-on-failure -j 2 --timeout 900 -E "^(($once)\\.|micro_bench_smoke$|house_rules$)"
