#!/usr/bin/env bash
# Prepares the device check (scripts/device_check.sh) on this CPU machine, so that the GPU
# machine's time goes to the GPU: builds the tools and the test binary against pip's LibTorch
# 2.11 (scripts/torch2_venv.sh's venv: torch 2.11.0+cu130, the build the GPU machines' image
# holds, so the binaries run there against that image's torch libraries), then copies into
# .device/ (ignored by git):
#   bin/  recycle-build, -train, -inspect, -predict and recycle_tests;
#   lib/  the shared libraries they link that are neither glibc's, GCC's nor the torch wheel's
#         (RocksDB and its compressors, gflags, xxHash, libspng, libjpeg-turbo: Debian 12's,
#         built for glibc 2.36, older than the GPU image's).
# Then, with the device tool: run(command="bash scripts/device_check.sh", carry=[".device"]).
# Usage: scripts/device_pack.sh [BUILD]   (build directory: build-torch2/, reused when present)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-torch2}
py=$(bash scripts/torch2_venv.sh | tail -n 1)
prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')
torchlib=$(dirname "$("$py" -c 'import torch; print(torch.__file__)')")/lib
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRECYCLE_BUILD_TESTS=ON -DRECYCLE_BUILD_BENCH=ON \
  -DCMAKE_PREFIX_PATH="$prefix" >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
tools=(recycle-build recycle-train recycle-inspect recycle-predict)
cmake --build "$build" -j "$(nproc)" --target "${tools[@]}" recycle_tests
rm -rf .device
mkdir -p .device/bin .device/lib
for t in "${tools[@]}" recycle_tests; do cp "$build/$t" .device/bin/; done
# Every library a binary resolves here, less the system's base and the torch wheel's own.
for bin in .device/bin/*; do ldd "$bin"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  while read -r lib; do
    case "$lib" in
      "$torchlib"/* | */site-packages/nvidia/* | */libc.so* | */libm.so* | */libpthread.so* | \
        */libdl.so* | */librt.so* | */libutil.so* | */ld-linux* | */libgcc_s.so* | */libstdc++.so* | */libgomp.so*) ;;
      *) cp -L "$lib" .device/lib/ ;;
    esac
  done
(cd .device && sha256sum bin/* lib/* > MANIFEST)
echo "device_pack: .device holds $(ls .device/bin | wc -l) programs and $(ls .device/lib | wc -l) libraries ($(du -sh .device | cut -f1)): $(ls .device/lib | tr '\n' ' ')"
