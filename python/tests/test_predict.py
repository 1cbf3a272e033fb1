"""recycle.predict against recycle-predict and recycle-train on the same cache and head."""
import json

import pytest

import recycle
from conftest import run_tool


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Weights, a cache built from them (200 train, 100 test samples at 0.5) and a head."""
    root = tmp_path_factory.mktemp("predict")
    enc, cache, head = root / "enc.pt", root / "cache", root / "head.pt"
    run_tool("recycle-train", "--data", "fashion-mnist", "--classes", "0-4", "--limit", 200,
             "--width", 4, "--recycle", 0, "--epochs", 1, "--eval-split", "none",
             "--save-model", enc)
    for split, limit in (("train", 200), ("test", 100)):
        run_tool("recycle-build", "--data", "fashion-mnist", "--classes", "5-9", "--split", split,
                 "--limit", limit, "--weights", enc, "--recycle", 0.5, "--cache", cache)
    r = run_tool("recycle-train", "--cache", cache, "--epochs", 2, "--save-head", head, "--json")
    return {"root": root, "enc": enc, "cache": cache, "head": head,
            "test_acc": json.loads(r.stdout.splitlines()[-1])["test_acc"]}


def test_predict_equals_the_tool_and_the_training_runs_accuracy(trained):
    t = trained
    out = t["root"] / "py.jsonl"
    r = recycle.predict(t["cache"], t["head"], t["enc"], "fashion-mnist", out, classes="5-9",
                        limit=100)
    assert r["samples"] == 100 and r["hits"] == 100 and r["misses"] == 0
    assert r["accuracy"] == pytest.approx(t["test_acc"])  # the split recycle-train evaluated
    cli = t["root"] / "cli.jsonl"
    run_tool("recycle-predict", "--cache", t["cache"], "--head", t["head"], "--weights", t["enc"],
             "--data", "fashion-mnist", "--classes", "5-9", "--split", "test", "--limit", 100,
             "--out", cli)
    assert out.read_text() == cli.read_text()  # the same rows, byte for byte
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 100 and all(row["hit"] for row in rows)


def test_misses_run_the_prefix_and_bad_arguments_raise(trained):
    t = trained
    # Test samples the cache does not hold (the next 50): misses, predicted through the prefix.
    r = recycle.predict(t["cache"], t["head"], t["enc"], "fashion-mnist", t["root"] / "m.csv",
                        classes="5-9", limit=150, top_k=2)
    assert r["samples"] == 150 and r["hits"] == 100 and r["misses"] == 50
    with pytest.raises(ValueError):
        recycle.predict(t["cache"], t["head"], t["enc"], "fashion-mnist", t["root"] / "x.txt")
    with pytest.raises(ValueError):
        recycle.predict(t["cache"], t["head"], t["enc"], "fashion-mnist", t["root"] / "x.jsonl",
                        batch_size=0)
    with pytest.raises(RuntimeError):  # a head file that is not one
        recycle.predict(t["cache"], t["enc"], t["enc"], "fashion-mnist", t["root"] / "x.jsonl",
                        classes="5-9", limit=10)
    other = t["root"] / "other.pt"
    run_tool("recycle-train", "--data", "fashion-mnist", "--classes", "0-4", "--limit", 100,
             "--width", 4, "--recycle", 0, "--epochs", 1, "--seed", 1, "--eval-split", "none",
             "--save-model", other)
    with pytest.raises(recycle.StaleCacheError):
        recycle.predict(t["cache"], t["head"], other, "fashion-mnist", t["root"] / "x.jsonl",
                        classes="5-9", limit=10)
    assert not (t["root"] / "x.jsonl").exists()  # nothing written on a failure


def test_a_python_prefixs_cache_is_served_by_cached_prefix_not_predict(trained, tmp_path):
    """recycle.predict and recycle-predict on a cache that recycle.build filled from a Python
    prefix: one line each, in the caller's words, naming CachedPrefix (not --weights)."""
    import torch

    data = torch.utils.data.TensorDataset(torch.randn(20, 3), torch.arange(20) % 2)
    prefix = torch.nn.Linear(3, 4)
    cache = tmp_path / "py-cache"
    recycle.build(cache, data, prefix, codec="fp32", progress=False)
    with pytest.raises(ValueError) as e:
        recycle.predict(cache, trained["head"], None, "fashion-mnist", tmp_path / "p.jsonl")
    message = str(e.value)
    assert "\n" not in message and "Python prefix" in message
    assert "recycle.CachedPrefix" in message and "--weights" not in message
    r = run_tool("recycle-predict", "--cache", cache, "--head", trained["head"], "--data",
                 "fashion-mnist", "--limit", 10, "--out", tmp_path / "p.jsonl", check=False)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "program's own prefix" in r.stderr and "recycle.CachedPrefix" in r.stderr
    assert "--weights FILE is required" not in r.stderr
    assert recycle.inspect(cache)["classifier"] == "none"
