#!/usr/bin/env bash
# Builds the Python package recycle in BUILD (default build/) and installs it into
# /usr/bin/python3's site directory (cmake --install BUILD --component python), so that
# `/usr/bin/python3 -c "import recycle"` works from anywhere. Without the package in the build
# (RECYCLE_BUILD_PYTHON=OFF: no torch or pybind11 for /usr/bin/python3) it says so and does
# nothing. Needs root (or sudo) to write the site directory.
set -euo pipefail
build=${1:-build}
if ! grep -q '^RECYCLE_BUILD_PYTHON:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "install_python: $build has no Python package (RECYCLE_BUILD_PYTHON is OFF)"
  exit 0
fi
cmake --build "$build" -j "$(nproc)" --target recycle_python
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" cmake --install "$build" --component python >/dev/null
cd /
/usr/bin/python3 -c "import recycle; print('install_python: import recycle ->', recycle.__file__)"
