"""The engine's command-line tools on the environment's PATH: `recycle-build`, `recycle-train`,
`recycle-predict`, `recycle-inspect` and `recycle-bench` are console scripts of the package that
run the executables installed beside it (recycle/bin/, built against this environment's torch by
the same build as recycle._native). Each execs its executable in place of the Python process (so
exit codes, signals and the tools' own worker processes are the tool's), with torch's library
folder on the loader's path: the executables link the torch this package was built for, found in
the environment rather than bundled. Another torch is refused here with one line, as `import
recycle` refuses it."""
import importlib.util
import os
import pathlib
import re
import sys

from ._build_info import TORCH_VERSION as _BUILT_FOR

_BIN = pathlib.Path(__file__).resolve().parent / "bin"


def _torch_dir():
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"recycle: no torch in this environment ({sys.executable}); the tools need the "
                 f"torch they were built for, {_BUILT_FOR}")
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def _torch_version(torch_dir):
    """torch.__version__ without importing torch (a second of start-up): torch/version.py."""
    try:
        text = (torch_dir / "version.py").read_text()
    except OSError:
        return None
    m = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.M)
    return m.group(1) if m else None


def _run(name):
    exe = _BIN / name
    if not exe.is_file():
        sys.exit(f"{name}: this install of recycle has no {exe} (a package built without its tools); "
                 "reinstall recycle (docs/pytorch2.md)")
    torch_dir = _torch_dir()
    have = _torch_version(torch_dir)
    if have != _BUILT_FOR:
        sys.exit(f"{name}: recycle was built for torch {_BUILT_FOR}, but this environment has torch "
                 f"{have} ({torch_dir}): reinstall recycle here (docs/pytorch2.md)")
    env = dict(os.environ)
    lib = str(torch_dir / "lib")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    os.execve(str(exe), [name] + sys.argv[1:], env)


def build():
    _run("recycle-build")


def train():
    _run("recycle-train")


def predict():
    _run("recycle-predict")


def inspect():
    _run("recycle-inspect")


def corpus():
    _run("recycle-corpus")


def bench():
    _run("recycle-bench")
