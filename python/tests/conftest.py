"""Fixtures of the package's tests: the tools of the build under test (RECYCLE_TOOLS_DIR, set by
ctest; else the build/ beside python/), and caches made by the real recycle-build."""
import os
import pathlib
import subprocess
import sys

import pytest
import torch

SOURCE = pathlib.Path(__file__).resolve().parents[2]
TOOLS = pathlib.Path(os.environ.get("RECYCLE_TOOLS_DIR", SOURCE / "build"))
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")


def pytest_configure(config):
    # The package calls nothing deprecated (issue 66): a DeprecationWarning or FutureWarning
    # raised from one of its modules (recycle, recycle.hf, ..., recycle_tools) fails the test.
    for kind in ("DeprecationWarning", "FutureWarning"):
        config.addinivalue_line("filterwarnings", f"error::{kind}:recycle")


def torchrun(nproc):
    """How a user starts nproc local processes: torchrun under torch 2.x (the script beside this
    interpreter); under Debian's torch 1.13 `python -m torch.distributed.run` with
    `--redirects 1 --tee 1`, since its defaults fail at start on Python 3.11 (lines then carry a
    `[defaultR]:` prefix)."""
    if int(torch.__version__.split(".")[0]) >= 2:
        script = pathlib.Path(sys.executable).parent / "torchrun"
        assert script.exists(), f"{script}: torch 2.x installs torchrun beside its interpreter"
        return [str(script), "--standalone", "--nproc_per_node", str(nproc)]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
            str(nproc), "--redirects", "1", "--tee", "1"]


def pypi_model(name):
    """The folder of pretrained model `name` from its PyPI packages (examples/pypi_models.py:
    all-MiniLM-L6-v2, all-mpnet-base-v2), or a skip naming what to install."""
    sys.path.insert(0, str(SOURCE / "examples"))
    try:
        import pypi_models
        return pypi_models.model_path(name)
    except pypi_models.Missing as e:
        pytest.skip(str(e))
    finally:
        sys.path.remove(str(SOURCE / "examples"))


def tool(name):
    path = TOOLS / name
    if not path.exists():
        pytest.skip(f"{path} is not built")
    return str(path)


def run_tool(name, *args, check=True):
    r = subprocess.run([tool(name), *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"{name} {' '.join(map(str, args))} exited {r.returncode}:\n{r.stderr}")
    return r


CLI_COMMON = ["--data", "fashion-mnist", "--model", "resnet18", "--width", "4", "--recycle", "0.5"]


def cli_cache(root, codec, splits=(("train", 200), ("test", 100))):
    cache = root / f"cli-{codec}"
    for split, limit in splits:
        run_tool("recycle-build", *CLI_COMMON, "--split", split, "--limit", limit, "--codec",
                 codec, "--cache", cache, "--json")
    return cache


@pytest.fixture(scope="session")
def cli_fp32(tmp_path_factory):
    """A cache recycle-build made: 200 train and 100 test samples, ResNet-18 width 4 at 0.5, fp32."""
    return cli_cache(tmp_path_factory.mktemp("cli"), "fp32")


@pytest.fixture(scope="session")
def cli_fp16(tmp_path_factory):
    """The same samples and model as cli_fp32, stored fp16."""
    return cli_cache(tmp_path_factory.mktemp("cli"), "fp16")
