"""Files that would run code when loaded (issue 65 item 4): weights, heads and checkpoints are
tensor files (safetensors) that load without running anything; a TorchScript archive given as
one, such as a module whose __setstate__ prints, is refused in one line and nothing it holds
runs. The tools' own files still load."""
import json
import struct
from typing import Tuple

import pytest
import torch

from conftest import FASHION, run_tool

MARK = "RAN-CODE-FROM-A-DATA-FILE"


class Printing(torch.nn.Module):
    """A module whose loading prints MARK: TorchScript calls __setstate__ on load."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    @torch.jit.export
    def __getstate__(self):
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool]):
        print("RAN-CODE-FROM-A-DATA-FILE")
        self.w = state[0]
        self.training = state[1]

    def forward(self, x):
        return x


COMMON = ["--data", "fashion-mnist", "--model", "resnet18", "--width", "4", "--threads", "1"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not FASHION.exists():
        pytest.skip("dataset-fashion-mnist is not installed")
    root = tmp_path_factory.mktemp("hostile-files")
    crafted = root / "crafted.pt"
    torch.jit.script(Printing()).save(str(crafted))
    enc = root / "enc.pt"
    run_tool("recycle-train", *COMMON, "--classes", "0-4", "--limit", 100, "--recycle", 0,
             "--epochs", 1, "--eval-split", "none", "--save-model", enc)
    cache = root / "c"
    for split, limit in (("train", 100), ("test", 50)):
        run_tool("recycle-build", "--data", "fashion-mnist", "--classes", "5-9", "--split", split,
                 "--limit", limit, "--weights", enc, "--recycle", 0.5, "--threads", 1,
                 "--cache", cache)
    head = root / "head.pt"
    run_tool("recycle-train", "--cache", cache, "--epochs", 1, "--threads", 1, "--save-head",
             head)
    return {"root": root, "crafted": crafted, "enc": enc, "cache": cache, "head": head}


def safetensors_metadata(path):
    """The __metadata__ of a safetensors file, read as the format says (no library needed)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]).get("__metadata__", {})


def refused(r):
    assert MARK not in r.stdout + r.stderr, r.stdout + r.stderr
    assert r.returncode != 0, r.stdout
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "older recycle" in r.stderr, r.stderr
    return r.stderr


def test_the_tools_own_files_are_tensor_files_that_load(files):
    assert "recycle.spec" in safetensors_metadata(files["enc"])
    assert "recycle.head" in safetensors_metadata(files["head"])
    r = run_tool("recycle-predict", "--cache", files["cache"], "--head", files["head"],
                 "--weights", files["enc"], "--data", "fashion-mnist", "--classes", "5-9",
                 "--limit", 50, "--out", files["root"] / "p.jsonl", "--json")
    assert json.loads(r.stdout.splitlines()[-1])["hits"] == 50


def test_a_crafted_weights_file_runs_nothing(files):
    r = run_tool("recycle-build", "--data", "fashion-mnist", "--split", "test", "--limit", 20,
                 "--weights", files["crafted"], "--recycle", 0.5,
                 "--cache", files["root"] / "other", check=False)
    assert "--convert-old" in refused(r)


def test_a_crafted_head_runs_nothing(files):
    r = run_tool("recycle-predict", "--cache", files["cache"], "--head", files["crafted"],
                 "--weights", files["enc"], "--data", "fashion-mnist", "--classes", "5-9",
                 "--limit", 10, "--out", files["root"] / "q.jsonl", check=False)
    refused(r)


def test_a_crafted_checkpoint_runs_nothing(files):
    ckpt = files["root"] / "ckpt.pt"
    ckpt.write_bytes(files["crafted"].read_bytes())
    r = run_tool("recycle-train", "--cache", files["cache"], "--epochs", 1, "--threads", 1,
                 "--checkpoint", ckpt, check=False)
    assert "move it away" in refused(r)
    # The tools' own checkpoint resumes.
    own = files["root"] / "own.ckpt"
    run_tool("recycle-train", "--cache", files["cache"], "--epochs", 1, "--threads", 1,
             "--checkpoint", own)
    assert "recycle.checkpoint" in safetensors_metadata(own)
    r = run_tool("recycle-train", "--cache", files["cache"], "--epochs", 1, "--threads", 1,
                 "--checkpoint", own, "--json")
    assert json.loads(r.stdout.splitlines()[-1])["resumed_epochs"] == 1
