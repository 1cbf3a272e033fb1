"""Builds recycle._native with the project's CMake build, against the torch this interpreter
imports (torch.utils.cmake_prefix_path), as torch extensions do. See pyproject.toml.

Environment:
  RECYCLE_BUILD_DIR  a CMake build directory to build in (kept, so a reinstall only relinks; an
                     existing one keeps its own options). Default: a folder under setuptools'
                     build/ beside this file.
  RECYCLE_BUILD_JOBS parallel compile jobs (default: the cores this process may use).
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
HOW = "pip install --no-build-isolation ./python (from the repository's root)"
VERSION = "0.1.0"
# The engine's tools, installed in the package's bin/ and run by its console scripts
# (recycle_tools.py, pyproject.toml's [project.scripts]).
TOOLS = ["recycle-build", "recycle-train", "recycle-predict", "recycle-inspect", "recycle-corpus",
         "recycle-reshard", "recycle-bench"]


def version():
    """VERSION with the torch it is built against as the local version, as PyTorch Geometric's
    wheels carry it: 0.1.0+pt211cu130 (torch 2.11, CUDA 13.0), 0.1.0+pt113cpu."""
    try:
        import torch
    except ImportError:  # metadata only; build_extension says what is missing
        return VERSION
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    cuda = torch.version.cuda
    return f"{VERSION}+pt{major}{minor}" + ("cu" + cuda.replace(".", "") if cuda else "cpu")


def the_users_torch():
    try:
        import torch
    except ImportError:
        sys.exit("recycle: no torch in this build's environment; recycle compiles against the torch "
                 f"of the environment it installs into: install torch there first, then {HOW}")
    # pip's isolated build environment has a torch of its own, not the user's.
    if "pip-build-env" in torch.__file__:
        sys.exit(f"recycle: building in pip's isolated environment would compile against another "
                 f"torch than yours; use {HOW}")
    return torch


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        torch = the_users_torch()
        cmake = shutil.which("cmake")
        if cmake is None:
            sys.exit("recycle: cmake is not on PATH (bash scripts/setup.sh installs it with the "
                     "other Debian packages the engine needs)")
        build = pathlib.Path(os.environ.get("RECYCLE_BUILD_DIR") or
                             pathlib.Path(self.build_temp).resolve() / "cmake").resolve()
        configure = [cmake, "-S", str(ROOT), "-B", str(build), "-DRECYCLE_BUILD_PYTHON=ON",
                     f"-DPython_EXECUTABLE={sys.executable}",
                     f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"]
        if not (build / "CMakeCache.txt").exists():
            configure += ["-DCMAKE_BUILD_TYPE=Release", "-DRECYCLE_BUILD_TESTS=OFF",
                          "-DRECYCLE_BUILD_EXAMPLES=OFF"]
        jobs = os.environ.get("RECYCLE_BUILD_JOBS") or str(len(os.sched_getaffinity(0)))
        print(f"recycle: building against torch {torch.__version__} in {build} "
              f"({jobs} jobs; the engine takes about 10 minutes on 2 cores the first time)",
              flush=True)
        subprocess.check_call(configure, stdout=subprocess.DEVNULL)
        subprocess.check_call([cmake, "--build", str(build), "--target", "recycle_python", *TOOLS,
                               "-j", jobs])
        built = build / "python" / "recycle"
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        native = [p for p in built.glob("_native*.so")]
        if len(native) != 1:
            sys.exit(f"recycle: expected one _native*.so in {built}, found {native}")
        shutil.copyfile(native[0], target)
        shutil.copyfile(built / "_build_info.py", target.parent / "_build_info.py")
        bin_dir = target.parent / "bin"
        bin_dir.mkdir(exist_ok=True)
        for tool in TOOLS:
            shutil.copy2(build / tool, bin_dir / tool)  # with its mode: an executable


setup(version=version(), ext_modules=[Extension("recycle._native", sources=[])],
      cmdclass={"build_ext": CMakeBuild})
