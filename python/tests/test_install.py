"""The package knows the torch it was built for, and refuses another at import with one line."""
import os
import subprocess
import sys

import torch

import recycle
from recycle import _build_info


def test_it_was_built_for_the_torch_it_runs_with():
    assert _build_info.TORCH_VERSION == torch.__version__
    assert recycle.__file__


def test_another_torch_is_refused_at_import_with_one_line():
    # A torch of another version stands in as this one's version string; the check reads it
    # before the extension (built for this torch's symbols) is loaded.
    code = "import torch; torch.__version__ = '0.0.1'; import recycle"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: recycle was built for torch {torch.__version__}, "
                           "but this environment has torch 0.0.1"), r.stderr
    assert "pip install --no-build-isolation ./python" in last
