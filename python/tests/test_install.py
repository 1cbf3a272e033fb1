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


def test_the_tools_console_scripts_read_the_torch_version_without_importing_torch(tmp_path):
    import recycle_tools as _tools
    assert _tools._torch_version(_tools._torch_dir()) == torch.__version__
    (tmp_path / "version.py").write_text("__version__ = '0.0.1'\ncuda = None\n")
    assert _tools._torch_version(tmp_path) == "0.0.1"
    assert _tools._torch_version(tmp_path / "nowhere") is None


def test_a_tool_under_another_torch_is_refused_with_one_line(tmp_path, monkeypatch):
    import recycle_tools as _tools
    monkeypatch.setattr(_tools, "_BIN", tmp_path)
    (tmp_path / "recycle-build").write_text("#!/bin/sh\nexit 0\n")
    monkeypatch.setattr(_tools, "_BUILT_FOR", "0.0.1")
    try:
        _tools.build()
    except SystemExit as e:
        message = str(e.code)
    assert message.startswith("recycle-build: recycle was built for torch 0.0.1, but this "
                              f"environment has torch {torch.__version__}"), message


def test_the_tools_module_starts_without_importing_torch_or_recycle():
    code = ("import sys, recycle_tools; "
            "print(recycle_tools._BUILT_FOR, 'torch' in sys.modules, 'recycle' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [torch.__version__, "False", "False"]


def test_a_console_script_runs_its_tool_with_the_exit_code_and_output_of_the_tool(tmp_path):
    # Where the package was installed with its tools (a wheel, pip install ./python), the console
    # script beside the interpreter runs the bundled executable; a build tree's package has none.
    import recycle_tools as _tools
    script = os.path.join(os.path.dirname(sys.executable), "recycle-inspect")
    if not (_tools._BIN / "recycle-inspect").is_file() or not os.path.exists(script):
        import pytest
        pytest.skip("this recycle was not installed with its tools (a build tree's package)")
    r = subprocess.run([script, "--cache", str(tmp_path / "none")], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("recycle-inspect: error:"), r.stderr
    r = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "Usage: recycle-inspect" in r.stdout
