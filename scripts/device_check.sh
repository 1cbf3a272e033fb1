#!/usr/bin/env bash
# The device check, run on a GPU machine with what scripts/device_pack.sh put in .device/:
#   1. the GPU and the image's torch; the carried binaries' libraries all found;
#   2. the GPU tests (tests/e2e/gpu_e2e_test.cc, tests/models/device_test.cc: a cache built on
#      the GPU holds the CPU's records under the same identity, a model trained on the GPU, a
#      head trained and predicted on either device alike);
#   3. bench/gpu_bench.py on the GPU (ResNet-50 and a BERT-base-size transformer at r = 0.5:
#      build against the prefix's rate and the disk's, head epochs against full fine-tuning and
#      the online prefix, the GPU's busy share). Its table is printed last. (The CPU rows
#      beside it are measured on the CPU machines: bench/gpu_bench.py --device cpu.)
# Logs and tables go to $OUT (the device tool brings them back), else /tmp/device-check.
# From this CPU machine: bash scripts/device_pack.sh, then the device tool's
#   run(command="bash scripts/device_check.sh", carry=[".device"], timeout_s=540)
# Usage: scripts/device_check.sh [--quick]   (--quick: bench sizes for a dry run on a CPU)
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
out=${OUT:-/tmp/device-check}
mkdir -p "$out"
quick=()
device=cuda
if [ "${1:-}" = --quick ]; then quick=(--quick); fi
step() { echo "device_check: [$(( $(date +%s) - start )) s] $*"; }

[ -x .device/bin/recycle-train ] || { echo "device_check: no .device/bin: run scripts/device_pack.sh here first, and carry .device" >&2; exit 1; }
(cd .device && sha256sum -c --quiet MANIFEST) || { echo "device_check: .device differs from its MANIFEST" >&2; exit 1; }
torchdir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))') || exit 1
export LD_LIBRARY_PATH="$PWD/.device/lib:$torchdir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RECYCLE_TOOLS_DIR="$PWD/.device/bin" OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
step "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
python3 -c 'import torch; print("device_check: torch", torch.__version__, "CUDA", torch.version.cuda, "GPU", torch.cuda.is_available())'
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  if [ ${#quick[@]} -eq 0 ]; then echo "device_check: no GPU here (pass --quick for a dry run on the CPU)" >&2; exit 1; fi
  device=cpu
fi
missing=$(for b in .device/bin/*; do ldd "$b"; done | grep "not found" | sort -u)
if [ -n "$missing" ]; then echo "device_check: libraries not found: $missing" >&2; exit 1; fi

step "GPU tests"
.device/bin/recycle_tests --gtest_filter='Gpu*:Device.*:DeviceStreams.*:PinnedBatches.*:CompactBatch.*:Nccl.*' >"$out/gpu_tests.log" 2>&1
tests_rc=$?
grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|error" "$out/gpu_tests.log" | head -40

step "bench on $device"
python3 bench/gpu_bench.py --tools .device/bin --device "$device" "${quick[@]}" --out "$out" \
  >"$out/gpu_bench.log" 2>&1
bench_rc=$?
step "done: GPU tests exit $tests_rc, bench exit $bench_rc"
tail -n 30 "$out/gpu_bench.log"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
