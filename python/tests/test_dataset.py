"""recycle.CachedDataset, inspect and verify over caches made by the real recycle-build."""
import gzip
import json
import pathlib
import shutil

import pytest
import torch

import recycle
from conftest import FASHION, run_tool


def idx_labels(split, n):
    name = "train" if split == "train" else "t10k"
    with gzip.open(FASHION / f"{name}-labels-idx1-ubyte.gz", "rb") as f:
        data = f.read()
    return list(data[8:8 + n])


def test_len_labels_manifest_match_the_tool(cli_fp32):
    ds = recycle.CachedDataset(cli_fp32)
    assert len(ds) == 200
    # recycle-build keeps the file's order and labels (all ten classes: no --classes).
    assert [ds[i][1] for i in range(len(ds))] == idx_labels("train", 200)
    assert ds.labels.tolist() == idx_labels("train", 200)
    m = ds.manifest
    info = json.loads(run_tool("recycle-inspect", "--cache", cli_fp32, "--json").stdout.splitlines()[-1])
    assert m["model"] == info["model"] and m["codec"] == "fp32" == info["codec"]
    assert m["splits"]["train"]["samples"] == 200 and m["splits"]["train"]["complete"]
    x, y = ds[0]
    assert x.dtype == torch.float32
    assert list(x.shape) == info["record_shapes"][0]
    test = recycle.CachedDataset(cli_fp32, split="test")
    assert len(test) == 100 and [test[i][1] for i in range(100)] == idx_labels("test", 100)


def test_fp16_cache_reads_the_same_tensors_within_the_codec(cli_fp32, cli_fp16):
    exact, half = recycle.CachedDataset(cli_fp32), recycle.CachedDataset(cli_fp16)
    a, la = exact.read(range(200))
    b, lb = half.read(range(200))
    assert torch.equal(la, lb)
    assert a.shape == b.shape and b.dtype == torch.float32
    # fp16 rounds to nearest: relative error <= 2^-11 for normal values, absolute 2^-25 near 0.
    assert torch.all((a - b).abs() <= a.abs() * 2.0 ** -11 + 2.0 ** -24)
    assert not torch.equal(a, b)  # it is a real fp16 cache, not fp32 twice
    assert a.abs().sum() > 0


def test_single_reads_batched_reads_and_negative_indices_agree(cli_fp32):
    ds = recycle.CachedDataset(cli_fp32)
    batch, labels = ds.read([5, 0, 199, 5])
    for row, i in enumerate([5, 0, 199, 5]):
        x, y = ds[i]
        assert torch.equal(batch[row], x) and labels[row] == y
    assert torch.equal(ds[-1][0], ds[199][0])


def test_dataloader_with_workers_and_distributed_sampler(cli_fp32):
    ds = recycle.CachedDataset(cli_fp32)
    ref, ref_labels = ds.read(range(len(ds)))
    loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2, shuffle=False)
    xs, ys = zip(*loader)
    assert torch.equal(torch.cat(xs), ref) and torch.equal(torch.cat(ys), ref_labels)
    seen = []
    for rank in range(2):
        sampler = torch.utils.data.DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
        seen += list(sampler)
        for x, y in torch.utils.data.DataLoader(ds, batch_size=32, sampler=sampler, num_workers=1):
            assert x.shape[1:] == ref.shape[1:]
    assert sorted(seen) == list(range(200))


def test_inspect_and_verify_as_the_tool(cli_fp32):
    info = recycle.inspect(cli_fp32)
    tool = json.loads(run_tool("recycle-inspect", "--cache", cli_fp32, "--verify", "--json").stdout.splitlines()[-1])
    assert info["records"] == tool["records"] and info["splits"] == tool["splits"]
    report = recycle.verify(cli_fp32)
    assert report["ok"] and report["checked"] == tool["checked"] > 0 and report["corrupt"] == 0


def test_bad_arguments_raise(cli_fp32, tmp_path):
    with pytest.raises(RuntimeError, match="no split 'valid'"):
        recycle.CachedDataset(cli_fp32, split="valid")
    with pytest.raises(ValueError):
        recycle.CachedDataset(cli_fp32, split="a/b")
    with pytest.raises(ValueError):
        recycle.CachedDataset(cli_fp32, split=3)
    with pytest.raises(ValueError):
        recycle.CachedDataset(cli_fp32, block_cache_mb=0)
    with pytest.raises(RuntimeError):
        recycle.CachedDataset(tmp_path / "none")
    with pytest.raises(ValueError):
        recycle.CachedDataset(None)
    ds = recycle.CachedDataset(cli_fp32)
    with pytest.raises(IndexError):
        ds[200]
    with pytest.raises(IndexError):
        ds.read([0, 200])
    with pytest.raises(TypeError):
        ds["a"]
    with pytest.raises(RuntimeError):
        recycle.inspect(tmp_path / "none")


def flip_middle_of_largest_table(cache):
    # Records live in table files (*.sst), those of 16 KB or more in blob files (*.blob).
    tables = sorted([*pathlib.Path(cache).glob("*.sst"), *pathlib.Path(cache).glob("*.blob")],
                    key=lambda p: p.stat().st_size)
    assert tables, "no table or blob file"
    data = bytearray(tables[-1].read_bytes())
    for at in range(len(data) // 4, len(data) // 2, 97):
        data[at] ^= 0x5A
    tables[-1].write_bytes(bytes(data))


def test_corrupt_records_raise_corrupt_record_error(cli_fp32, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(cli_fp32, copy)
    flip_middle_of_largest_table(copy)
    with pytest.raises(recycle.CorruptRecordError):
        recycle.verify(copy)
    report = recycle.verify(copy, raise_on_error=False)
    assert not report["ok"]
    with pytest.raises(recycle.CorruptRecordError):
        ds = recycle.CachedDataset(copy)
        for i in range(len(ds)):
            ds[i]


def test_a_cache_of_the_tool_holds_what_the_same_prefix_computes_in_python(tmp_path):
    """recycle-build with a scripted model (torchscript:FILE) caches its prefix; the same prefix
    run in Python on the same preprocessed images gives the tensors CachedDataset reads, within
    the fp16 codec's rounding and the build's batch-norm folding (within 1e-4)."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(8, 10))
    with torch.no_grad():  # batch-norm statistics that are not the identity
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
    model.eval()
    torch.jit.script(model).save(str(tmp_path / "m.pt"))
    run_tool("recycle-build", "--data", "fashion-mnist", "--split", "train", "--limit", "150",
             "--model", f"torchscript:{tmp_path / 'm.pt'}", "--split-at", "1", "--codec", "fp16",
             "--cache", tmp_path / "c")
    ds = recycle.CachedDataset(tmp_path / "c")
    got, labels = ds.read(range(150))
    with gzip.open(FASHION / "train-images-idx3-ubyte.gz", "rb") as f:
        pixels = torch.frombuffer(bytearray(f.read()[16:16 + 150 * 784]), dtype=torch.uint8)
    images = ((pixels.float() / 255 - 0.2860) / 0.3530).reshape(150, 1, 28, 28)
    with torch.no_grad():
        want = model[:3](images)
    assert got.shape == want.shape == (150, 4, 28, 28)
    assert labels.tolist() == idx_labels("train", 150)
    assert torch.all((got - want).abs() <= want.abs() * 2.0 ** -11 + 1e-4)


def test_a_text_cache_of_the_tool_reads_as_named_tensors(tmp_path):
    """A text cache (variable-length records: hidden states and a length) reads as a dict per
    sample, and as batches padded with zeros to their longest."""
    import random
    rng = random.Random(1)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    lines = [f"{i % 2}\t" + " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
             for i in range(40)]
    (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
    run_tool("recycle-build", "--data", f"tsv:{tmp_path / 'train.tsv'}", "--split", "train",
             "--model", "transformer", "--recycle", "0.5", "--cache", tmp_path / "c")
    ds = recycle.CachedDataset(tmp_path / "c")
    assert ds.tensor_names == ["hidden", "length"]
    lengths = []
    for i in range(len(ds)):
        x, y = ds[i]
        assert x["hidden"].dim() == 2 and x["hidden"].shape[0] == int(x["length"]) > 0
        assert y == i % 2
        lengths.append(int(x["length"]))
    assert len(set(lengths)) > 1
    loader = recycle.CachedLoader(tmp_path / "c", "train", batch_size=8, shuffle=False)
    for b, (batch, labels) in enumerate(loader):
        assert batch["hidden"].shape[1] == max(lengths[8 * b:8 * b + 8])
        for i in range(len(labels)):
            x, _ = ds[8 * b + i]
            n = int(x["length"])
            assert torch.equal(batch["hidden"][i, :n], x["hidden"])
            assert torch.all(batch["hidden"][i, n:] == 0)
