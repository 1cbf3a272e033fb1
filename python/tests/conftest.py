"""Fixtures of the package's tests: the tools of the build under test (RECYCLE_TOOLS_DIR, set by
ctest; else the build/ beside python/), and caches made by the real recycle-build."""
import os
import pathlib
import subprocess

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
TOOLS = pathlib.Path(os.environ.get("RECYCLE_TOOLS_DIR", SOURCE / "build"))
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")


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
