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
        subprocess.check_call([cmake, "--build", str(build), "--target", "recycle_python",
                               "-j", jobs])
        built = build / "python" / "recycle"
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        native = [p for p in built.glob("_native*.so")]
        if len(native) != 1:
            sys.exit(f"recycle: expected one _native*.so in {built}, found {native}")
        shutil.copyfile(native[0], target)
        shutil.copyfile(built / "_build_info.py", target.parent / "_build_info.py")


setup(ext_modules=[Extension("recycle._native", sources=[])], cmdclass={"build_ext": CMakeBuild})
