#!/usr/bin/env bash
# Makes (or reuses) the virtual environment of composer_peer.py: MosaicML Composer 0.32.1 from
# PyPI, which pins its own torch (2.6-2.7, with CUDA's libraries: about 5 GB), apart from the
# engine's environments. Prints the environment's python on the last line of stdout, for
# recycle-bench --progressive --composer-python. Exits 3 with one line on stderr when the
# environment is missing and PyPI cannot be reached (nothing else is changed then).
# Usage: bench/peers/composer_venv.sh [VENV]   (default: $RECYCLE_COMPOSER_VENV, else
#                                              ~/.cache/recycle/venv-composer)
set -euo pipefail
composer_version=0.32.1
venv=${1:-${RECYCLE_COMPOSER_VENV:-$HOME/.cache/recycle/venv-composer}}
py="$venv/bin/python"
ready() {
  "$py" -c "import composer, numpy
assert composer.__version__ == '$composer_version', composer.__version__" >/dev/null 2>&1
}
if ! ready; then
  # Any python 3.9-3.12 will do: Composer 0.32 supports those.
  base=""
  for candidate in python3.12 python3.11 python3.10 python3.9 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c \
      'import sys, venv; assert (3, 9) <= sys.version_info[:2] <= (3, 12)' 2>/dev/null; then
      base=$candidate
      break
    fi
  done
  if [ -z "$base" ]; then
    echo "composer_venv: no python 3.9-3.12 with venv here (Composer $composer_version needs one)" >&2
    exit 3
  fi
  [ -x "$py" ] || "$base" -m venv "$venv"
  if ! "$py" -m pip install -q --disable-pip-version-check --retries 1 --timeout 60 \
    "mosaicml==$composer_version" numpy >&2; then
    echo "composer_venv: cannot install mosaicml==$composer_version (PyPI not reachable?)" >&2
    exit 3
  fi
  ready || { echo "composer_venv: $py does not import composer $composer_version" >&2; exit 3; }
fi
echo "$py"
