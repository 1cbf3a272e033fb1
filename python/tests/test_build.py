"""recycle.build: codecs, reruns, stale caches, bad arguments, and the tools on its caches."""
import json
import time

import pytest
import torch

import recycle
from conftest import run_tool


class Pairs(torch.utils.data.Dataset):
    """(input, label) pairs from tensors."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], int(self.y[i])


def make_data(n=300, seed=0, shape=(1, 12, 12), duplicates=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((n,) + shape, generator=g)
    if duplicates:
        x[-duplicates:] = x[:duplicates]
    y = torch.randint(0, 5, (n,), generator=g)
    return Pairs(x, y)


def prefix(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                               torch.nn.ReLU(), torch.nn.MaxPool2d(2))


def expected(net, data):
    net.eval()
    with torch.no_grad():
        return net(torch.stack([data[i][0] for i in range(len(data))]))


def int8_bound(a):
    """Half a quantisation step of each sample's channel (its first dimension), plus rounding."""
    flat = a.flatten(2)
    step = (flat.amax(2) - flat.amin(2)) / 255
    return (step / 2 + 1e-6)[:, :, None, None].expand_as(a)


# Largest error each codec may make (fp16/bf16: round to nearest; int8: half a channel's step).
TOLERANCE = {"fp32": lambda a: torch.zeros_like(a), "fp16": lambda a: a.abs() * 2.0 ** -11 + 2.0 ** -24,
             "bf16": lambda a: a.abs() * 2.0 ** -8 + 1e-30, "int8": int8_bound}


@pytest.mark.parametrize("codec", ["fp32", "fp16", "bf16", "int8"])
def test_every_codec_round_trips_dtype_shape_and_values(tmp_path, codec):
    data, net = make_data(), prefix()
    report = recycle.build(tmp_path / "c", data, net, codec=codec, batch_size=64)
    assert report["samples"] == 300 and report["computed"] == 300 and report["unique"] == 300
    ds = recycle.CachedDataset(tmp_path / "c")
    got, labels = ds.read(range(len(ds)))
    want = expected(net, data)
    assert got.dtype == torch.float32 and got.shape == want.shape == (300, 4, 6, 6)
    assert torch.equal(labels, data.y)
    err = (got - want).abs()
    assert torch.all(err <= TOLERANCE[codec](want)), f"{codec}: largest error {err.max()}"
    if codec != "fp32":
        assert err.max() > 0  # the codec really was applied
    assert ds.manifest["codec"] == codec
    assert ds.manifest["record_layout"][0]["name"] == "activation"


def test_several_named_tensors_and_exact_dtypes(tmp_path):
    data = make_data(n=50)

    def two(x):
        return {"features": x.mean(dim=(2, 3)) * 3, "argmax": x.flatten(1).argmax(1),
                "positive": x.flatten(1)[:, :5] > 0}

    recycle.build(tmp_path / "c", data, two, model_id="two-heads", codec="fp32", batch_size=16)
    ds = recycle.CachedDataset(tmp_path / "c")
    x, y = ds[7]
    assert set(x) == {"features", "argmax", "positive"}
    assert x["argmax"].dtype == torch.int64 and x["positive"].dtype == torch.bool
    want = two(data[7][0][None])
    for k in x:
        assert torch.equal(x[k], want[k][0]), k


def test_second_call_is_a_no_op_and_duplicates_are_computed_once(tmp_path):
    data, net = make_data(duplicates=40), prefix()
    first = recycle.build(tmp_path / "c", data, net, batch_size=64)
    assert first["unique"] == 260 and first["computed"] == 260 and first["records"] == 260
    before = recycle.inspect(tmp_path / "c")
    again = recycle.build(tmp_path / "c", data, net, batch_size=64)
    assert again["computed"] == 0 and again["index_written"] == 0 and again["bytes"] == 0
    assert recycle.inspect(tmp_path / "c") == before
    # Another split of the same samples shares their records.
    test = recycle.build(tmp_path / "c", data, net, split="test", batch_size=100)
    assert test["computed"] == 0 and test["index_written"] == 300


def test_a_changed_sample_is_recomputed_alone(tmp_path):
    data, net = make_data(), prefix()
    recycle.build(tmp_path / "c", data, net, batch_size=64)
    data.x = data.x.clone()
    data.x[123] += 1
    r = recycle.build(tmp_path / "c", data, net, batch_size=64)
    assert r["computed"] == 1 and r["index_written"] == 1
    got, _ = recycle.CachedDataset(tmp_path / "c").read([123])
    assert torch.allclose(got, expected(net, data)[123:124], atol=1e-2)


def test_a_stale_cache_is_refused_as_recycle_build_does(tmp_path):
    data = make_data()
    recycle.build(tmp_path / "c", data, prefix(0), batch_size=100)
    with pytest.raises(recycle.StaleCacheError, match="fingerprint.*rebuild=True"):
        recycle.build(tmp_path / "c", data, prefix(1), batch_size=100)
    with pytest.raises(recycle.StaleCacheError, match="codec"):
        recycle.build(tmp_path / "c", data, prefix(0), codec="bf16", batch_size=100)
    with pytest.raises(recycle.StaleCacheError, match="model"):
        recycle.build(tmp_path / "c", data, prefix(0), model_id="other", batch_size=100)
    r = recycle.build(tmp_path / "c", data, prefix(1), rebuild=True, batch_size=100)
    assert r["computed"] == 300
    # A cache recycle-build made is refused too (another model).


def test_a_cache_of_the_tool_is_refused_by_a_python_prefix(cli_fp32, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(cli_fp32, copy)
    with pytest.raises(recycle.StaleCacheError, match="model"):
        recycle.build(copy, make_data(), prefix(), codec="fp32")


def test_bad_arguments_raise_value_errors(tmp_path):
    data, net = make_data(n=20), prefix()
    c = tmp_path / "c"
    bad = [dict(batch_size=0), dict(batch_size="8"), dict(codec="fp8"), dict(keyer="nope"),
           dict(split="a/b"), dict(split=5), dict(model_id=""), dict(compression="zip")]
    for kwargs in bad:
        with pytest.raises(ValueError):
            recycle.build(c, data, net, **kwargs)
    with pytest.raises(ValueError):
        recycle.build(c, data, "not callable")
    with pytest.raises(ValueError):
        recycle.build(c, [1, 2, 3], net)
    with pytest.raises(ValueError):
        recycle.build(c, data, lambda x: "a string", model_id="s")
    with pytest.raises(ValueError, match="model_id"):
        recycle.build(c, data, lambda x: x)
    with pytest.raises(ValueError):
        recycle.build(c, [(torch.randn(3), 0.5)] * 4, lambda x: x, model_id="f")
    with pytest.raises(ValueError):
        recycle.build(c, data, lambda x: x * float("inf"), model_id="inf", codec="fp16")
    with pytest.raises(ValueError):
        recycle.build(None, data, net)


def test_a_dataloader_and_an_id_keyer(tmp_path):
    data, net = make_data(n=100), prefix()
    loader = torch.utils.data.DataLoader(data, batch_size=30, shuffle=False)
    r = recycle.build(tmp_path / "c", loader, net, keyer="id", codec="fp32")
    assert r["samples"] == 100 and r["computed"] == 100
    assert recycle.inspect(tmp_path / "c")["keyer"] == "id"
    got, _ = recycle.CachedDataset(tmp_path / "c").read(range(100))
    assert torch.allclose(got, expected(net, data), atol=1e-6)


def test_the_tools_verify_a_python_cache(tmp_path):
    recycle.build(tmp_path / "c", make_data(), prefix(), batch_size=64)
    r = run_tool("recycle-inspect", "--cache", tmp_path / "c", "--verify", "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["checked"] == 300 and report["corrupt"] == 0 and report["problems"] == []


def test_a_record_damaged_in_its_blob_file_is_computed_again_by_a_plain_rerun(tmp_path):
    # Records of 4 x 32 x 32 floats (16 KB and more) are kept in RocksDB's blob files.
    data, net = make_data(n=40, shape=(1, 64, 64)), prefix()
    recycle.build(tmp_path / "c", data, net, codec="fp32", batch_size=16)
    blob = next(p for p in (tmp_path / "c").iterdir() if p.suffix == ".blob")
    raw = bytearray(blob.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    blob.write_bytes(bytes(raw))
    report = recycle.verify(tmp_path / "c", raise_on_error=False)
    assert report["corrupt"] == 1 and report["checked"] == 40, report
    assert "rerun the build" in report["repair"]
    with pytest.raises(recycle.CorruptRecordError, match="rerun the build"):
        recycle.verify(tmp_path / "c")
    again = recycle.build(tmp_path / "c", data, net, codec="fp32", batch_size=16)
    assert again["computed"] == 1 and again["cache_records"] == 40, again
    report = recycle.verify(tmp_path / "c")
    assert report["ok"] and report["repair"] == ""
    assert not (tmp_path / "c" / "recycle-damaged-records").exists()
    got, _ = recycle.CachedDataset(tmp_path / "c").read(list(range(40)))
    assert torch.allclose(got, expected(net, data), atol=1e-5)


def scripted_model(tmp_path, seed=0):
    """A small nn.Sequential, scripted and saved: the engine's torchscript:FILE model. Its
    blocks (docs/torchscript.md: a child with parameters starts one): "0" (conv), "1" (batch
    norm, relu), "3" (conv, relu, pool, flatten); its classifier "7". model[:3] ends at "1"."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(8, 5))
    model.eval()
    path = tmp_path / f"model{seed}.pt"
    torch.jit.script(model).save(str(path))
    return model, path


def test_recycle_train_trains_a_python_cache_of_an_engine_model(tmp_path):
    model, path = scripted_model(tmp_path)
    data = make_data(n=400)
    classes = [f"c{i}" for i in range(5)]
    for split in ("train", "test"):
        r = recycle.build(tmp_path / "c", data, model[:3], split=split, classes=classes,
                          engine_model=f"torchscript:{path}", engine_split_at="1", batch_size=64)
        assert r["samples"] == 400
    info = recycle.inspect(tmp_path / "c")
    assert info["model"].startswith("torchscript:") and info["split_at"] == "1"
    # The cache names its program; recycle-train loads it only from the file given as --model.
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--epochs", "2", check=False)
    assert r.returncode == 2 and "give --model torchscript:FILE" in r.stderr, r.stderr
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--model", f"torchscript:{path}",
                 "--epochs", "2", "--batch", "32", "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["epochs"] == 2 and 0 <= report["test_acc"] <= 1
    # Another prefix under the engine model's name is refused.
    other, _ = scripted_model(tmp_path, seed=1)
    with pytest.raises(ValueError, match="differ from the engine model"):
        recycle.build(tmp_path / "d", data, other[:3], classes=classes,
                      engine_model=f"torchscript:{path}", engine_split_at="1")
    with pytest.raises(ValueError, match="class names"):
        recycle.build(tmp_path / "e", data, model[:3], engine_model=f"torchscript:{path}",
                      engine_split_at="1")


class ConvHead(torch.nn.Module):
    """A head that is no nn.Sequential: a conv with a skip, then a linear layer."""

    def __init__(self, classes):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 6 * 6, classes)

    def forward(self, x):
        x = x + torch.relu(self.conv(x))
        return self.fc(x.flatten(1))


def train_script_head_and_check_in_python(tmp_path, module, apply):
    """Scripts `module` to head.pt, trains it with recycle-train on the cache tmp_path/c (300 test
    samples) and checks that the saved module, run by apply(head, activations) in Python, gives
    the accuracy the engine reported."""
    torch.manual_seed(0)
    torch.jit.script(module).save(str(tmp_path / "head.pt"))
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--script-head", tmp_path / "head.pt",
                 "--epochs", "6", "--batch", "32", "--lr", "0.1", "--save-head",
                 tmp_path / "trained.pt", "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["epochs"] == 6 and report["test_acc"] > 0.9, report
    head = torch.jit.load(str(tmp_path / "trained.pt")).eval()
    acts, labels = recycle.CachedDataset(tmp_path / "c", "test").read(range(300))
    with torch.no_grad():
        acc = (apply(head, acts).argmax(1) == labels).double().mean().item()
    assert abs(acc - report["test_acc"]) < 1e-9


def test_recycle_train_trains_a_script_head_on_a_cache_of_any_python_prefix(tmp_path):
    # Three classes a 2x2 pooled prefix keeps apart: which of three bands of the image is brighter.
    g = torch.Generator().manual_seed(3)
    x = torch.randn(900, 1, 12, 12, generator=g)
    y = torch.randint(0, 3, (900,), generator=g)
    for b in range(3):  # the label's band is brighter
        x[y == b, 0, 4 * b:4 * b + 4] += 1.0
    net = prefix()
    classes = ["top", "middle", "bottom"]
    for split, rows in (("train", slice(0, 600)), ("test", slice(600, 900))):
        recycle.build(tmp_path / "c", Pairs(x[rows], y[rows]), net, split=split, classes=classes,
                      model_id="any-prefix", codec="fp32", batch_size=100)
    # Without a head the engine can build, recycle-train says how to give one.
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--epochs", "1", check=False)
    assert r.returncode != 0 and "--script-head FILE" in r.stderr, r.stderr
    # The saved head is the trained TorchScript module: it gives the same accuracy in Python.
    train_script_head_and_check_in_python(tmp_path, ConvHead(3), lambda head, acts: head(acts))
    # Data-parallel too: two ranks, asynchronous (every rank loads the same file).
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--script-head", tmp_path / "head.pt",
                 "--epochs", "6", "--batch", "16", "--lr", "0.1", "--nproc", "2", "--sync", "async",
                 "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["world_size"] == 2 and report["test_acc"] > 0.9, report
    # A head of the wrong number of classes, or no TorchScript file, is refused with one line.
    torch.jit.script(ConvHead(5)).save(str(tmp_path / "five.pt"))
    (tmp_path / "junk.pt").write_bytes(b"not a module")
    for path, says in (("five.pt", "maps the cache's activations 2x4x6x6 to 2x5, not to 2x3"),
                       ("junk.pt", "is not a TorchScript module")):
        r = run_tool("recycle-train", "--cache", tmp_path / "c", "--script-head", tmp_path / path,
                     check=False)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


class TwoPartPrefix(torch.nn.Module):
    """A prefix whose records hold two tensors: pooled features and an int64 mask of rows."""

    def __init__(self):
        super().__init__()
        self.net = prefix()

    def forward(self, x):
        feat = self.net(x)
        # Rows 0-2 of the 6 are masked in half the samples (by the sign of a pixel).
        keep = (x[:, 0, 0, 0] > 0).long()[:, None].expand(-1, 6).clone()
        keep[:, 3:] = 1
        return {"feat": feat, "mask": keep}


class MaskedHead(torch.nn.Module):
    """A head of two arguments, as a record's tensors arrive: features, then their mask."""

    def __init__(self, classes):
        super().__init__()
        self.fc = torch.nn.Linear(4 * 6 * 6, classes)

    def forward(self, feat, mask):
        return self.fc((feat * mask[:, None, :, None].to(feat.dtype)).flatten(1))


def test_recycle_train_passes_a_record_of_several_tensors_to_a_script_head(tmp_path):
    # Three classes told by which band of columns is brighter in rows 6-11 (never masked).
    g = torch.Generator().manual_seed(5)
    x = torch.randn(900, 1, 12, 12, generator=g)
    y = torch.randint(0, 3, (900,), generator=g)
    for b in range(3):
        x[y == b, 0, 6:12, 4 * b:4 * b + 4] += 1.0
    net = TwoPartPrefix()
    for split, rows in (("train", slice(0, 600)), ("test", slice(600, 900))):
        recycle.build(tmp_path / "c", Pairs(x[rows], y[rows]), net, split=split,
                      classes=["a", "b", "c"], model_id="two-part", codec="fp32", batch_size=100)
    names = [t["name"] for t in recycle.inspect(tmp_path / "c")["record_layout"]]
    assert names == ["feat", "mask"]
    # The trained module, given the records' tensors in their order, agrees in Python.
    train_script_head_and_check_in_python(tmp_path, MaskedHead(3),
                                          lambda head, acts: head(acts["feat"], acts["mask"]))
    # Data-parallel, two ranks averaging gradients.
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--script-head", tmp_path / "head.pt",
                 "--epochs", "6", "--batch", "16", "--lr", "0.1", "--nproc", "2", "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["world_size"] == 2 and report["test_acc"] > 0.9, report
    # A head of one argument is refused with one line naming the record's tensors.
    torch.jit.script(ConvHead(3)).save(str(tmp_path / "one.pt"))
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--script-head", tmp_path / "one.pt",
                 check=False)
    says = "does not run on the cache's activations (feat 2x4x6x6, mask 2x6): "
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_labels_outside_the_named_classes_are_refused(tmp_path):
    data = make_data(n=40)  # labels 0..4
    with pytest.raises(ValueError, match="outside the 3 classes"):
        recycle.build(tmp_path / "c", data, prefix(), classes=["a", "b", "c"])
    recycle.build(tmp_path / "d", data, prefix())
    assert recycle.inspect(tmp_path / "d")["classes"] == ["0", "1", "2", "3", "4"]


def test_progress_counts_the_samples_on_stderr_when_asked(tmp_path, capfd):
    data, net = make_data(n=200), prefix()
    recycle.build(tmp_path / "c", data, net, batch_size=64, progress=True)
    err = capfd.readouterr().err
    assert "build train: 200/200 samples (100%) in " in err
    recycle.build(tmp_path / "d", data, net, batch_size=64, progress=False)
    assert capfd.readouterr().err == ""


def test_build_leaves_every_submodule_in_its_own_mode(tmp_path):
    net = prefix()
    net.train()
    net[1].eval()  # a frozen batch norm inside a model in train mode
    recycle.build(tmp_path / "c", make_data(n=40), net, batch_size=16)
    assert net.training and net[0].training and not net[1].training


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_inputs_are_refused_naming_the_sample(tmp_path, value):
    data, net = make_data(n=40), prefix()
    data.x[23, 0, 5, 7] = value
    with pytest.raises(ValueError, match="sample 23 holds NaN or infinity"):
        recycle.build(tmp_path / "c", data, net, batch_size=16)
    # The samples before it were stored; fixed, the rerun computes only the rest.
    data.x[23, 0, 5, 7] = 0.0
    r = recycle.build(tmp_path / "c", data, net, batch_size=16)
    assert r["samples"] == 40 and r["computed"] == 40 - 16


def test_progress_in_a_log_is_plain_lines_with_rate_and_eta(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RECYCLE_PROGRESS_SECONDS", "0.01")
    data, net = make_data(n=64), prefix()

    def slow(x):
        time.sleep(0.03)
        return net(x)

    recycle.build(tmp_path / "c", data, slow, model_id="slow", batch_size=16)
    err = capsys.readouterr().err  # pytest's capture: not a terminal
    assert "\r" not in err, err
    assert "samples/s, ETA " in err, err
    assert "build train: 64/64 samples (100%)," in err and "done in " in err, err
    # The default interval (30 s): a short build prints nothing.
    monkeypatch.delenv("RECYCLE_PROGRESS_SECONDS")
    recycle.build(tmp_path / "d", data, net, batch_size=16)
    assert capsys.readouterr().err == ""


def test_dict_outputs_are_stored_by_name_whatever_their_key_order(tmp_path):
    """Issue 54 item 1: a dict's tensors go to the records by name, not by position."""
    data = make_data(n=300)
    x = data.x.flatten(1)[:, :4]
    calls = [0]

    def swapping(batch):  # the probe and two batches {"a", "b"}, then {"b", "a"}
        calls[0] += 1
        h = batch.flatten(1)[:, :4]
        return {"a": h, "b": -h} if calls[0] <= 3 else {"b": -h, "a": h}

    recycle.build(tmp_path / "c", data, swapping, model_id="swap", codec="fp32", batch_size=100)
    got, _ = recycle.CachedDataset(tmp_path / "c").read(range(300))
    assert torch.equal(got["a"], x) and torch.equal(got["b"], -x)
    # Another split of an existing cache whose first batch gives the keys in the other order.
    calls[0] = 3
    r = recycle.build(tmp_path / "c", make_data(n=50, seed=1), swapping, split="test",
                      model_id="swap", codec="fp32", batch_size=25)
    assert r["computed"] == 50
    got, _ = recycle.CachedDataset(tmp_path / "c", "test").read(range(50))
    assert torch.equal(got["a"], make_data(n=50, seed=1).x.flatten(1)[:, :4])

    def later(change):
        calls = [0]

        def prefix(batch):
            calls[0] += 1
            h = batch.flatten(1)[:, :4]
            return {"a": h, "b": -h} if calls[0] <= 2 else change(h)
        return prefix

    cases = [(lambda h: {"zzz": h * 1000, "b": -h}, "gave 'zzz', which the records do not hold"),
             (lambda h: {"a": h}, "lacks 'b'"),
             (lambda h: {"a": h, "b": -h, "c": h}, "gave 'c'"),
             (lambda h: {"a": h.to(torch.int64), "b": -h}, "'a' is int64 in this batch, the records hold float32"),
             (lambda h: {"a": h[:, :3], "b": -h}, r"'a' has shape \[3\] per sample in this batch, the records hold \[4\]")]
    for i, (change, message) in enumerate(cases):
        with pytest.raises(ValueError, match=message):
            recycle.build(tmp_path / f"bad{i}", data, later(change), model_id="later", batch_size=100)


def test_labels_that_are_no_class_id_are_refused_before_any_work(tmp_path):
    """Issue 54 item 5: recycle-build --data npy:'s rule (0 to 1000000) and message."""
    x = torch.randn(8, 1, 4, 4)
    calls = [0]

    def net(batch):
        calls[0] += 1
        return batch * 2

    for label in (1000001, -1, 2 ** 40, 2 ** 62):
        data = [(x[i], label if i == 3 else 0) for i in range(8)]
        start = time.perf_counter()
        with pytest.raises(ValueError, match=f"^data: label {label} of sample 3 is not a class id "
                                             r"\(0 to 1000000\)$"):
            recycle.build(tmp_path / "c", data, net, model_id="net", batch_size=4)
        assert time.perf_counter() - start < 5
    assert calls[0] == 0  # refused before the prefix ran
    data = [(x[i], 1000000 if i == 3 else 0) for i in range(8)]
    assert recycle.build(tmp_path / "ok", data, net, model_id="net", batch_size=8)["samples"] == 8
    # recycle-build --data npy: says the same of the same label (one rule, class_id_problem).
    np = pytest.importorskip("numpy")
    (tmp_path / "npy").mkdir()
    np.save(tmp_path / "npy" / "train_x.npy", np.zeros((8, 1, 8, 8), dtype=np.uint8))
    np.save(tmp_path / "npy" / "train_y.npy", np.array([0, 0, 0, 2 ** 40, 0, 0, 0, 0], dtype=np.int64))
    r = run_tool("recycle-build", "--data", f"npy:{tmp_path / 'npy'}", "--split", "train",
                 "--model", "resnet18", "--width", "4", "--recycle", "0.5", "--cache",
                 tmp_path / "tool", check=False)
    assert r.returncode != 0
    assert "label 1099511627776 of sample 3 is not a class id (0 to 1000000)" in r.stderr, r.stderr
