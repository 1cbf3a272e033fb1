"""The engine's command-line tools on the environment's PATH: `recycle-build`, `recycle-train`,
`recycle-predict`, `recycle-inspect`, `recycle-corpus` and `recycle-bench` are console scripts
of the package `recycle` that run the executables installed in it (recycle/bin/, built against
this environment's torch by the same build as recycle._native). Each execs its executable in
place of the Python process (so exit codes, signals and the tools' own worker processes are the
tool's), with torch's library folder on the loader's path: the executables link the torch this
package was built for, found in the environment rather than bundled. Another torch is refused
here with one line, as `import recycle` refuses it.

A module beside the package, not in it: importing `recycle` imports torch (a second or more of
start-up, and an ImportError for another torch), which a tool's start needs neither of. This
finds the package's folder and reads its recycle/_build_info.py as text."""
import importlib.util
import os
import pathlib
import re
import sys


def _package():
    spec = importlib.util.find_spec("recycle")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("recycle: the package recycle is not installed in this environment")
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def _built_for(package):
    """The torch version recycle/_build_info.py names (what the build linked)."""
    m = re.search(r"""^TORCH_VERSION\s*=\s*['"]([^'"]+)['"]""",
                  (package / "_build_info.py").read_text(), re.M)
    return m.group(1) if m else None


_PACKAGE = _package()
_BIN = _PACKAGE / "bin"
_BUILT_FOR = _built_for(_PACKAGE)


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


def reshard():
    _run("recycle-reshard")


def bench():
    _run("recycle-bench")
