"""recycle.build and CachedLoader under torchrun with 2 processes (Gloo)."""
import json
import os
import subprocess
import sys
import textwrap

import torch

import recycle
from conftest import torchrun

# Each rank builds the cache (rank r computes its share, rank 0 writes), then reads its share of
# an epoch with CachedLoader (rank and world size from torch.distributed) and reports them. The
# ranks' prefixes give a dict's keys in different orders (issue 54 item 1: taken by name).
SCRIPT = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist, recycle
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(11)
    x = torch.randn(333, 3, 4, 4, generator=g)
    y = torch.randint(0, 4, (333,), generator=g)
    calls = []
    def prefix(batch):  # rank 1 gives the dict's keys in the other order: stored by name
        calls.append(len(batch))
        a, s = torch.tanh(batch * 2), batch.sum(dim=(1, 2, 3))
        return {"a": a, "s": s} if dist.get_rank() == 0 else {"s": s, "a": a}
    report = recycle.build(sys.argv[1], list(zip(x, y.tolist())), prefix, model_id="dist",
                           codec="fp32", batch_size=40, progress=True)
    loader = recycle.CachedLoader(sys.argv[1], "train", batch_size=32, seed=2)
    seen = sum(len(labels) for _, labels in loader)
    # One write of the whole line: the ranks share the pipe, and a line written in pieces (as
    # print does when stdout is unbuffered) can have another rank's line in its middle.
    sys.stdout.write("RESULT " + json.dumps({"rank": dist.get_rank(), "report": report,
                                             "prefix_rows": sum(calls), "seen": seen,
                                             "world": loader.world_size}) + "\\n")
    sys.stdout.flush()
    dist.destroy_process_group()
""")


def test_two_ranks_build_one_cache_and_share_an_epoch(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    cache = tmp_path / "cache"
    r = subprocess.run(torchrun(2) + [str(script), str(cache)], capture_output=True, text=True,
                       timeout=600,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    # Rank 0 alone draws the progress line, and it counts every rank's samples.
    assert r.stderr.count("build train: 333/333 samples (100%) in") == 1, r.stderr[-3000:]
    results = [json.loads(line.split("RESULT ", 1)[1]) for line in r.stdout.splitlines()
               if "RESULT " in line]
    assert sorted(res["rank"] for res in results) == [0, 1]
    for res in results:
        assert res["report"]["samples"] == 333 and res["report"]["computed"] == 333
        assert res["report"]["ranks"] == 2 and res["world"] == 2
        assert res["seen"] == 167  # ceil(333 / 2)
    # Each rank ran the prefix on about half the samples (plus rank 0's one-sample probe).
    rows = {res["rank"]: res["prefix_rows"] for res in results}
    assert rows[0] + rows[1] == 333 + 1 and abs(rows[0] - rows[1]) <= 10
    # The same cache as one process makes.
    g = torch.Generator().manual_seed(11)
    x = torch.randn(333, 3, 4, 4, generator=g)
    y = torch.randint(0, 4, (333,), generator=g)
    ds = recycle.CachedDataset(cache)
    got, labels = ds.read(range(333))
    assert torch.equal(labels, y)
    assert torch.equal(got["a"], torch.tanh(x * 2)) and torch.allclose(got["s"], x.sum(dim=(1, 2, 3)))
    assert recycle.verify(cache)["checked"] == 333


def two_ranks(tmp_path, text, cache):
    """Runs the script `text` on 2 ranks under torchrun with `cache` as its argument: rank ->
    its RESULT line's object."""
    script = tmp_path / "job.py"
    script.write_text(text)
    r = subprocess.run(torchrun(2) + [str(script), cache], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    results = {res["rank"]: res for res in
               (json.loads(line.split("RESULT ", 1)[1]) for line in r.stdout.splitlines()
                if "RESULT " in line)}
    assert sorted(results) == [0, 1]
    return results


# Two ranks read their own shards (recycle-build --nproc 2 --sharded) with CachedLoader: each
# epoch every rank takes the largest shard's number of samples, its own shard whole first.
SHARD_SCRIPT = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist, recycle
    dist.init_process_group("gloo")
    loader = recycle.CachedLoader(sys.argv[1], "train", batch_size=16, seed=3, sharded=True)
    labels = torch.cat([l for _, l in loader])
    refused = ""
    try:
        recycle.CachedLoader(sys.argv[1].replace("{rank}", str(dist.get_rank())), "train")
    except ValueError as e:
        refused = str(e)
    sys.stdout.write("RESULT " + json.dumps({"rank": dist.get_rank(), "seen": len(labels),
                                             "shard": loader.samples, "batches": len(loader),
                                             "refused": refused}) + "\\n")  # one write
    sys.stdout.flush()
    dist.destroy_process_group()
""")


def test_two_ranks_read_their_own_shards_padded_to_the_largest(tmp_path):
    from conftest import FASHION, run_tool
    if not (FASHION / "train-images-idx3-ubyte.gz").exists():
        import pytest
        pytest.skip("dataset-fashion-mnist is not installed")
    cache = str(tmp_path / "shard-{rank}")
    run_tool("recycle-build", "--data", "fashion-mnist", "--classes", "0-1", "--limit", "301",
             "--model", "resnet18", "--width", "8", "--recycle", "0.5", "--nproc", "2",
             "--sharded", "--cache", cache, "--threads", "2")
    results = two_ranks(tmp_path, SHARD_SCRIPT, cache)
    shards = [results[0]["shard"], results[1]["shard"]]
    assert sum(shards) == 301 and min(shards) > 0
    for res in results.values():
        assert res["seen"] == max(shards)  # padded to the largest shard
        assert res["batches"] == (max(shards) + 15) // 16
        assert "read it with sharded=True" in res["refused"]
    # A map-style dataset of a shard: refused unless asked for; then the shard, whole.
    import pytest
    with pytest.raises(ValueError, match="holds shard 1 of 2 of split train"):
        recycle.CachedDataset(cache.replace("{rank}", "1"))
    assert len(recycle.CachedDataset(cache, sharded=True)) == results[0]["shard"]  # rank 0


# Two ranks build their own shards with recycle.build(..., sharded=True) ("{rank}" in the path:
# one directory each), run it again (nothing computed), read them with CachedLoader(sharded=True),
# and are refused, both, when rank 1 is given other data.
SHARDED_BUILD_SCRIPT = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist, recycle
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(5)
    x = torch.randn(257, 3, 4, 4, generator=g)
    y = torch.randint(0, 3, (257,), generator=g)
    calls = []
    def prefix(batch):
        calls.append(len(batch))
        return {"a": torch.tanh(batch * 2), "s": batch.sum(dim=(1, 2, 3))}
    def build(data, path=sys.argv[1]):
        return recycle.build(path, data, prefix, model_id="shards", codec="fp32",
                             batch_size=40, sharded=True)
    class Counted(torch.utils.data.Dataset):  # the positions read
        def __init__(self):
            self.read = []
        def __len__(self):
            return len(x)
        def __getitem__(self, i):
            self.read.append(i)
            return x[i], int(y[i])
    counted = Counted()
    first = build(counted)
    rows = sum(calls)
    # A DataLoader is read whole, twice: the same shards, in caches of their own.
    loader_built = build(torch.utils.data.DataLoader(list(zip(x, y.tolist())), batch_size=40),
                         sys.argv[1].replace("shard-", "loader-shard-"))
    again = build(list(zip(x, y.tolist())))
    loader = recycle.CachedLoader(sys.argv[1], "train", batch_size=16, seed=1, sharded=True)
    seen = sum(len(labels) for _, labels in loader)
    other = x.clone()
    if rank == 1:
        other[100] += 1
    refused = ""
    try:
        build(list(zip(other, y.tolist())))
    except ValueError as e:
        refused = str(e)
    # rebuild=True where rank 1's cache directory also holds a user's file: every rank refuses
    # before any deletes (rank 0's shard is not rebuilt).
    if rank == 1:
        open(sys.argv[1].replace("{rank}", "1") + "/notes.txt", "w").write("mine")
    before, rebuild_refused = sum(calls), ""
    try:
        recycle.build(sys.argv[1], list(zip(x, y.tolist())), prefix, model_id="shards",
                      codec="fp32", batch_size=40, sharded=True, rebuild=True)
    except ValueError as e:
        rebuild_refused = str(e)
    # Both ranks given one directory (no {rank} in the path): refused before either writes.
    one_dir = ""
    try:
        recycle.build(sys.argv[1].replace("{rank}", "same"), list(zip(x, y.tolist())), prefix,
                      model_id="shards", codec="fp32", batch_size=40, sharded=True)
    except ValueError as e:
        one_dir = str(e)
    sys.stdout.write("RESULT " + json.dumps({"rank": rank, "first": first, "again": again,
                                             "prefix_rows": rows, "seen": seen,
                                             "read": counted.read, "loader_built": loader_built,
                                             "refused": refused,
                                             "rebuild_refused": rebuild_refused,
                                             "rebuilt_rows": sum(calls) - before,
                                             "one_dir": one_dir}) + "\\n")  # one write
    sys.stdout.flush()
    dist.destroy_process_group()
""")


def test_two_ranks_build_their_own_shards_with_recycle_build(tmp_path):
    import pytest
    cache = str(tmp_path / "shard-{rank}")
    results = two_ranks(tmp_path, SHARDED_BUILD_SCRIPT, cache)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(257, 3, 4, 4, generator=g)
    y = torch.randint(0, 3, (257,), generator=g)
    # The shard rule on the keys the writer makes: rank r keeps exactly the samples it puts in r.
    shard_of = torch.tensor(recycle._native.shards_of_rows("xxh3", x, 0, 2)[0])
    sizes = [int((shard_of == r).sum()) for r in (0, 1)]
    assert min(sizes) > 0 and sum(sizes) == 257
    for rank, res in results.items():
        first, again = res["first"], res["again"]
        assert first["samples"] == 257 and first["computed"] == 257 and first["shards"] == 2
        assert first["shard"] == rank and [s["samples"] for s in first["per_shard"]] == sizes
        assert again["computed"] == 0 and again["index_written"] == 0
        assert res["prefix_rows"] == sizes[rank] + 1  # its own samples, and the layout's probe
        assert res["seen"] == -(-257 // 2)  # a shared cache's share: ceil(257 / 2)
        # Sample 100 is in rank 0's part and one of rank 1's spot checks (every 4th of 257).
        assert res["refused"] == ("sample 100 of data is not the same on rank 0 as on rank 1 "
                                  "(its content key differs): every rank must call build with "
                                  "the same data in the same order")
        # Read once each: its part (every 2nd sample) and the spot checks in the other part,
        # then its shard's samples; never the whole split.
        part_and_spots = set(range(rank, 257, 2)) | set(range(0, 257, 4)[:64])
        assert sorted(res["read"]) == sorted(list(part_and_spots) + torch.nonzero(
            shard_of == rank).flatten().tolist())
        # 129 or 128 of the part, 32 spot checks, the shard's ~128: against 2 x 257 when the
        # split is read twice.
        assert len(res["read"]) < 257 * 1.3
        assert res["loader_built"]["per_shard"][rank]["samples"] == sizes[rank]
        assert res["loader_built"]["computed"] == 257
        assert "also holds notes.txt" in res["rebuild_refused"], res["rebuild_refused"]
        assert res["rebuilt_rows"] == 0  # no rank deleted or rebuilt anything
        assert "ranks 0 and 1 of this sharded build were given one directory" in res["one_dir"]
        assert not os.path.exists(cache.replace("{rank}", "same"))
        path = cache.replace("{rank}", str(rank))
        info = recycle.inspect(path)["splits"]["train"]
        assert info["shard"] == {"index": rank, "count": 2, "rule": "xxh3_64(key) % count",
                                 "split_samples": 257}
        got, labels = recycle.CachedDataset(path, sharded=True).read(range(sizes[rank]))
        mine = shard_of == rank
        assert torch.equal(labels, y[mine]) and torch.equal(got["a"], torch.tanh(x[mine] * 2))
        assert recycle.verify(path)["checked"] == sizes[rank]
    # The whole split asked of a shard, and another shard count, are refused as stale.
    data = list(zip(x, y.tolist()))
    with pytest.raises(recycle.StaleCacheError, match="the cache has shard 0 of 2, this run asks "
                       "for the whole split"):
        recycle.build(cache.replace("{rank}", "0"), data, lambda b: {"a": torch.tanh(b * 2),
                      "s": b.sum(dim=(1, 2, 3))}, model_id="shards", codec="fp32")


# A tokenizer as transformers' are called (ids of characters, cut at `cut`), for the texts below.
TOKENIZER = textwrap.dedent("""
    class Tokenizer:
        pad_token_id = 0
        def __init__(self, cut=64):
            self.cut = cut
        def __call__(self, texts, padding=True, truncation=True, return_tensors="pt"):
            rows = [[1 + ord(c) % 90 for c in t][:self.cut] for t in texts]
            ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.int64)
            for i, r in enumerate(rows):
                ids[i, :len(r)] = torch.tensor(r)
            return {"input_ids": ids, "attention_mask": (ids > 0).long()}
""")
TEXTS = [("text %d " % (i % 50)) * (1 + i % 4) for i in range(70)]  # distinct, 7 to 32 characters

# Two ranks build their own shards of texts (records as long as the text), keyed by the text.
TEXT_SHARDS_SCRIPT = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist, recycle
    dist.init_process_group("gloo")
    rank = dist.get_rank()
""") + TOKENIZER + textwrap.dedent("""
    emb = torch.nn.Embedding(100, 3)
    texts = [("text %d " % (i % 50)) * (1 + i % 4) for i in range(70)]
    data = [(t, i % 3) for i, t in enumerate(texts)]
    def build(tokenizer):
        return recycle.build(sys.argv[1], data, lambda b: {"hidden": emb(b["input_ids"]),
                             "mask": b["attention_mask"]}, model_id="text-shards", codec="fp32",
                             batch_size=16, tokenizer=tokenizer, sharded=True)
    first = build(Tokenizer())
    refused = ""
    try:
        build(Tokenizer(64 if rank == 0 else 5))
    except ValueError as e:
        refused = str(e)
    path = sys.argv[1].replace("{rank}", str(rank))
    ds = recycle.CachedDataset(path, sharded=True)
    lengths = [int(ds[i][0]["mask"].sum()) for i in range(len(ds))]
    sys.stdout.write("RESULT " + json.dumps({"rank": rank, "first": first, "lengths": lengths,
                                             "refused": refused}) + "\\n")  # one write
    sys.stdout.flush()
    dist.destroy_process_group()
""")


def test_two_ranks_build_their_own_shards_of_texts(tmp_path):
    cache = str(tmp_path / "text-{rank}")
    results = two_ranks(tmp_path, TEXT_SHARDS_SCRIPT, cache)
    shard_of = recycle._native.shards_of_texts("text", TEXTS, 0, 2)[0]
    for rank, res in results.items():
        mine = [len(t) for t, s in zip(TEXTS, shard_of) if s == rank]
        assert res["first"]["samples"] == 70 and res["first"]["shard"] == rank
        assert res["first"]["per_shard"][rank]["samples"] == len(mine) > 0
        assert res["lengths"] == mine  # each record as long as its text, in split order
        assert recycle.inspect(cache.replace("{rank}", str(rank)))["keyer"] == "text"
        assert res["refused"].startswith("rank 1's preprocess is 'python, tokenizer "), res["refused"]


# Two ranks build one cache of texts together (rank 0 writes), as one process builds it.
TEXT_ONE_CACHE_SCRIPT = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist, recycle
    dist.init_process_group("gloo")
    rank = dist.get_rank()
""") + TOKENIZER + textwrap.dedent("""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(100, 3)
    texts = [("text %d " % (i % 50)) * (1 + i % 4) for i in range(70)]
    r = recycle.build(sys.argv[1], [(t, i % 3) for i, t in enumerate(texts)],
                      lambda b: {"hidden": emb(b["input_ids"]), "mask": b["attention_mask"]},
                      model_id="texts", codec="fp32", batch_size=16, tokenizer=Tokenizer(),
                      progress=False)
    sys.stdout.write("RESULT " + json.dumps({"rank": rank, "report": r}) + "\\n")  # one write
    sys.stdout.flush()
    dist.destroy_process_group()
""")


def test_two_ranks_build_one_cache_of_texts_as_one_process_does(tmp_path):
    cache = str(tmp_path / "together")
    results = two_ranks(tmp_path, TEXT_ONE_CACHE_SCRIPT, cache)
    for res in results.values():
        assert res["report"]["ranks"] == 2 and res["report"]["computed"] == 70
    # The same build in this process: the same records, bit for bit.
    namespace = {"torch": torch}
    exec(TOKENIZER, namespace)
    torch.manual_seed(0)
    emb = torch.nn.Embedding(100, 3)
    recycle.build(tmp_path / "alone", [(t, i % 3) for i, t in enumerate(TEXTS)],
                  lambda b: {"hidden": emb(b["input_ids"]), "mask": b["attention_mask"]},
                  model_id="texts", codec="fp32", batch_size=16,
                  tokenizer=namespace["Tokenizer"](), progress=False)
    together, alone = recycle.CachedDataset(cache), recycle.CachedDataset(tmp_path / "alone")
    a, la = together.read(range(70))
    b, lb = alone.read(range(70))
    assert torch.equal(la, lb) and torch.equal(a["mask"], b["mask"])
    assert torch.equal(a["hidden"], b["hidden"])
    assert [int(m.sum()) for m in a["mask"]] == [len(t) for t in TEXTS]
    assert recycle.verify(cache)["checked"] == 70


def test_the_key_pass_digest_and_the_reports_merge_are_the_engines():
    # The ranks of recycle.build(..., sharded=True) agree on their data with the digest
    # recycle-build's ranks compare (KeysDigest: each key's 16 bytes and its label, in order),
    # fed in chunks as the key pass goes.
    x = torch.randn(10, 3, generator=torch.Generator().manual_seed(0))
    _, keys = recycle._native.shards_of_rows("xxh3", x, 0, 2)
    assert isinstance(keys, bytes) and len(keys) == 10 * 16
    labels = list(range(10))
    whole = recycle._native.KeysDigest()
    whole.add(keys, labels)
    chunks = recycle._native.KeysDigest()
    chunks.add(keys[:64], labels[:4])
    chunks.add(keys[64:], labels[4:])
    assert whole.hexdigest() == chunks.hexdigest() and len(whole.hexdigest()) == 32
    other = recycle._native.KeysDigest()
    other.add(keys, labels[:9] + [0])
    assert other.hexdigest() != whole.hexdigest()
    # The shards' reports merged by the engine: the own shard's with the counts added.
    a = {"cache": "a", "samples": 6, "computed": 6, "seconds": 2.0, "shards": 2, "shard": 0}
    b = {"cache": "b", "samples": 4, "computed": 1, "seconds": 3.0, "shards": 2, "shard": 1}
    job = json.loads(recycle._native.merged_shard_reports([json.dumps(a), json.dumps(b)], 1))
    assert (job["cache"], job["shard"], job["samples"], job["computed"]) == ("b", 1, 10, 7)
    assert job["seconds"] == 3.0 and job["ranks"] == 2
    assert [s["cache"] for s in job["per_shard"]] == ["a", "b"]
