#!/usr/bin/env python3
"""Fine-tune a torchvision-style ResNet-18 on Fashion-MNIST with its first half frozen, from
recycle's cache, against the same loop running the frozen prefix every epoch.

    /usr/bin/python3 examples/finetune_resnet18.py [--train N] [--test N] [--epochs E] ...

The model is defined here (random init; no download, torchvision not needed): torchvision's
ResNet-18 (BasicBlock, [2, 2, 2, 2]) with a 3x3 stem for 28x28 gray images and a --width
option. Its first half, the stem, layer1 and layer2 (4 of its 8 residual blocks), is frozen:

  1. recycle.build runs that prefix once per distinct sample and stores it (train and test);
  2. the rest (layer3, layer4, pool, fc) is trained for --epochs from recycle.CachedDataset
     (a DataLoader over it), from recycle.CachedLoader, and, for comparison, with the frozen
     prefix recomputed under no_grad in every step (the same loop, the same head start);
  3. it prints each run's test accuracy and median epoch time, and the speedups;
  4. a loader benchmark: epochs of batches from CachedLoader (its default block cache, and one
     a quarter of the split's size) against a DataLoader over the same activations already in
     memory (a TensorDataset), taking turns epoch by epoch, medians of --bench-epochs;
  5. inference (rank 0): the trained head over the test images through recycle.CachedPrefix
     (every image cached: hits; the same images flipped left-right: misses, run by the prefix)
     against head(prefix(x)), taking turns, medians of --bench-epochs passes, and how many
     predicted classes agree.

Data-parallel, with DistributedSampler and DDP (Gloo), on 2 local processes:

    torchrun --standalone --nproc_per_node 2 examples/finetune_resnet18.py --epochs 2

(with Debian's torch 1.13, whose launcher fails on Python 3.11 without --redirects 1 --tee 1:
/usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 --tee 1
examples/finetune_resnet18.py --epochs 2). Each rank
computes its share of the cache and rank 0 writes it; each rank trains on its share of every
epoch with the per-rank batch --batch / world size, so the global batch is the same as alone.
Rank 0 evaluates and prints. --json FILE writes the figures.
"""
import argparse
import copy
import gzip
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import recycle

FASHION = "/usr/share/datasets/fashion-mnist"
BASELINE = "frozen prefix run every epoch"


# ---- the model: torchvision's ResNet-18, for 28x28 gray images ------------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


def resnet18(width, classes=10):
    """(prefix, head): stem + layer1 + layer2 | layer3 + layer4 + pool + fc."""
    w = width
    stem = nn.Sequential(nn.Conv2d(1, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU())
    layer = lambda cin, cout, stride: nn.Sequential(BasicBlock(cin, cout, stride),
                                                    BasicBlock(cout, cout, 1))
    prefix = nn.Sequential(stem, layer(w, w, 1), layer(w, 2 * w, 2))
    head = nn.Sequential(layer(2 * w, 4 * w, 2), layer(4 * w, 8 * w, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8 * w, classes))
    return prefix, head


# ---- data: Debian's Fashion-MNIST IDX files --------------------------------------------------
def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def fashion(split, limit):
    name = "train" if split == "train" else "t10k"
    x = read_idx(f"{FASHION}/{name}-images-idx3-ubyte.gz")[:limit]
    y = read_idx(f"{FASHION}/{name}-labels-idx1-ubyte.gz")[:limit].long()
    x = ((x.float() / 255 - 0.2860) / 0.3530).unsqueeze(1)  # [N, 1, 28, 28]
    return torch.utils.data.TensorDataset(x, y)


# ---- training --------------------------------------------------------------------------------
def rank_world():
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


class Run:
    """One way of training the head: run_epoch() trains it (DDP-wrapped when distributed) for
    one epoch on batches_of_epoch(e)'s (input, label) batches and returns the epoch's seconds;
    with `prefix`, the inputs are raw images run through it under no_grad in every step."""

    def __init__(self, head, batches_of_epoch, lr, prefix=None):
        self.head = head
        self.model = nn.parallel.DistributedDataParallel(head) if dist.is_initialized() else head
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9, nesterov=True,
                                   weight_decay=5e-4)
        self.batches_of_epoch, self.prefix = batches_of_epoch, prefix
        self.times = []

    def run_epoch(self):
        self.model.train()
        if dist.is_initialized():
            dist.barrier()
        start = time.perf_counter()
        for x, y in self.batches_of_epoch(len(self.times)):
            if self.prefix is not None:
                with torch.no_grad():
                    x = self.prefix(x)
            loss = F.cross_entropy(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
        if dist.is_initialized():
            dist.barrier()
        self.times.append(time.perf_counter() - start)


@torch.no_grad()
def accuracy(head, batches, prefix=None):
    head.eval()
    right = total = 0
    for x, y in batches:
        if prefix is not None:
            x = prefix(x)
        right += int((head(x).argmax(1) == y).sum())
        total += len(y)
    return right / total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", type=int, default=10000, help="training samples (the file's first N)")
    p.add_argument("--test", type=int, default=2000, help="test samples")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=128, help="global batch size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--width", type=int, default=16, help="channels of layer1 (torchvision: 64)")
    p.add_argument("--codec", default="fp16")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: cores / processes)")
    p.add_argument("--cache", default="/tmp/recycle-example-cache")
    p.add_argument("--bench-epochs", type=int, default=5)
    p.add_argument("--workers", type=int, default=0,
                   help="DataLoader workers of the CachedDataset run (0: batches read in the loop)")
    p.add_argument("--skip-baseline", action="store_true", help="no frozen-prefix-every-step run")
    p.add_argument("--json", help="write the figures to this file (rank 0)")
    a = p.parse_args()

    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        dist.init_process_group("gloo")
    rank, world = rank_world()
    torch.set_num_threads(a.threads or max(1, (os.cpu_count() or 1) // world))
    say = print if rank == 0 else (lambda *args, **kw: None)
    if a.batch % world:
        raise SystemExit(f"--batch {a.batch} is not a multiple of the {world} processes")
    per_rank = a.batch // world

    torch.manual_seed(0)
    prefix, head0 = resnet18(a.width)
    train_set, test_set = fashion("train", a.train), fashion("test", a.test)
    # Random weights, but batch-norm statistics of the data (the first 2,048 training images),
    # as a pretrained prefix would have; then frozen: eval mode, no gradients.
    prefix.requires_grad_(False)
    with torch.no_grad():
        for m in prefix.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.momentum = None  # a cumulative average over the calibration batches
        prefix.train()
        for lo in range(0, min(2048, len(train_set)), 256):
            prefix(train_set.tensors[0][lo:lo + 256])
    prefix.eval()

    # 1. the cache: the prefix once per distinct sample (each rank its share; rank 0 writes).
    start = time.perf_counter()
    for split, data in (("train", train_set), ("test", test_set)):
        # head=: the build times the rest of the model on a few outputs, for the speedup to expect
        r = recycle.build(a.cache, data, prefix, split=split, codec=a.codec,
                          head=head0 if split == "train" else None)
        say(f"build {split}: {r['samples']} samples, {r['computed']} computed, "
            f"{r['seconds']:.1f} s ({r['ranks'] if 'ranks' in r else 1} process(es))")
        if "prefix_share" in r:
            say(f"build {split}: the prefix is {100 * r['prefix_share']:.0f}% of the forward time; "
                f"expected epoch speedup {r['expected_speedup_vs_online']:.2f}x over the frozen "
                f"prefix run every step, {r['expected_speedup_vs_full']:.2f}x over full fine-tuning")
    build_s = time.perf_counter() - start

    cached_train = recycle.CachedDataset(a.cache, "train")
    cached_test = recycle.CachedDataset(a.cache, "test")
    test_batches = lambda: torch.utils.data.DataLoader(cached_test, batch_size=256)
    raw_test = lambda: torch.utils.data.DataLoader(test_set, batch_size=256)
    results = {}

    def report(name, head, times, acc):
        results[name] = {"test_acc": acc, "epoch_s": times, "median_epoch_s": statistics.median(times)}
        say(f"{name:34s} test acc {acc:.4f}   epoch s " + " ".join(f"{t:.2f}" for t in times))

    def sampler_for(data, epoch):
        if world == 1:
            return None
        s = torch.utils.data.DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
        s.set_epoch(epoch)
        return s

    def shuffled(data, epoch, workers=0):
        torch.manual_seed(1000 + epoch)
        s = sampler_for(data, epoch)
        return torch.utils.data.DataLoader(data, batch_size=per_rank, shuffle=s is None, sampler=s,
                                           num_workers=workers)

    # 2. the head from CachedDataset (a DataLoader over it), from CachedLoader, and the same loop
    # with the frozen prefix run in every step; each from the same initial head. The runs take
    # turns epoch by epoch, so a change in the machine's load falls on all of them alike.
    loader = recycle.CachedLoader(a.cache, "train", batch_size=per_rank, seed=0)
    runs = {"CachedDataset + DataLoader": Run(copy.deepcopy(head0), lambda e: shuffled(cached_train, e, a.workers), a.lr),
            "CachedLoader": Run(copy.deepcopy(head0), lambda e: loader, a.lr)}
    if not a.skip_baseline:
        runs[BASELINE] = Run(copy.deepcopy(head0), lambda e: shuffled(train_set, e), a.lr, prefix=prefix)
    for epoch in range(a.epochs):
        for run in runs.values():
            run.run_epoch()
    for name, run in runs.items():
        acc = accuracy(run.head, raw_test() if run.prefix is not None else test_batches(), run.prefix)
        report(name, run.head, run.times, acc)
    if not a.skip_baseline:
        base = results[BASELINE]["median_epoch_s"]
        for name in ("CachedDataset + DataLoader", "CachedLoader"):
            results[name]["epoch_speedup"] = base / results[name]["median_epoch_s"]
            say(f"epoch speedup of {name} over the frozen prefix: {results[name]['epoch_speedup']:.2f}x")

    # 4. the loader alone: an epoch of batches, CachedLoader against a DataLoader over the same
    # activations already in memory; CachedLoader with its default block cache (256 MB, which
    # holds the example's split up to about 20,000 samples at width 16, fp16) and with one of a
    # quarter of the split's records (read from the files every epoch).
    acts, labels = cached_train.read(range(len(cached_train)))
    in_memory = torch.utils.data.TensorDataset(acts, labels)
    m = cached_train.manifest  # record_bytes and records count every split's
    quarter_mb = max(1, int(m["record_bytes"] / m["records"] * len(cached_train) / 4 / 2 ** 20))
    contenders = [
        ("CachedLoader, default block cache", lambda: recycle.CachedLoader(
            a.cache, "train", batch_size=per_rank, seed=0)),
        (f"CachedLoader, {quarter_mb} MB block cache", lambda: recycle.CachedLoader(
            a.cache, "train", batch_size=per_rank, seed=0, block_cache_mb=quarter_mb)),
        ("DataLoader over tensors in memory", None)]
    # The contenders take turns epoch by epoch (side by side); the first epoch of each warms
    # its block cache and is not counted.
    sources = {name: make() if make else None for name, make in contenders}
    times = {name: [] for name, _ in contenders}
    samples = {}
    for e in range(a.bench_epochs + 1):
        for name, _ in contenders:
            source = sources[name]
            start = time.perf_counter()
            samples[name] = sum(len(y) for _, y in (source if source else shuffled(in_memory, e)))
            times[name].append(time.perf_counter() - start)
    bench = {}
    for name, _ in contenders:
        t = times[name][1:]
        bench[name] = {"epoch_s": t, "median_epoch_s": statistics.median(t), "samples": samples[name]}
        say(f"loader benchmark: {name:34s} epoch s " + " ".join(f"{x:.3f}" for x in t))
    memory_s = bench["DataLoader over tensors in memory"]["median_epoch_s"]
    for name, _ in contenders[:2]:
        bench[name]["speed_vs_in_memory"] = memory_s / bench[name]["median_epoch_s"]
        say(f"loader benchmark: {name} reads at {bench[name]['speed_vs_in_memory']:.2f}x the "
            "in-memory DataLoader's speed")

    # 5. inference from the cache in this loop: the CachedLoader run's head over the test images,
    # head(cached(x)) against head(prefix(x)); cached ones are hits, flipped ones misses.
    infer = {}
    if rank == 0:
        head = runs["CachedLoader"].head.eval()
        cached = recycle.CachedPrefix(a.cache, prefix)
        images = test_set.tensors[0]
        kinds = {"full model": (images, prefix), "CachedPrefix, all hits": (images, cached),
                 "CachedPrefix, all misses": (images.flip(3), cached),
                 "full model, flipped": (images.flip(3), prefix)}
        passes = {name: [] for name in kinds}
        classes = {}
        with torch.no_grad():
            for _ in range(a.bench_epochs):
                for name, (x, run_prefix) in kinds.items():
                    start = time.perf_counter()
                    classes[name] = torch.cat([head(run_prefix(x[lo:lo + 256])).argmax(1)
                                               for lo in range(0, len(x), 256)])
                    passes[name].append(time.perf_counter() - start)
        for name in kinds:
            infer[name] = {"pass_s": passes[name], "median_pass_s": statistics.median(passes[name])}
            say(f"inference: {name:26s} pass s " + " ".join(f"{t:.3f}" for t in passes[name]))
        for name, full in (("CachedPrefix, all hits", "full model"),
                           ("CachedPrefix, all misses", "full model, flipped")):
            r = infer[name]
            r["time_vs_full"] = r["median_pass_s"] / infer[full]["median_pass_s"]
            r["same_class"] = int((classes[name] == classes[full]).sum())
            say(f"inference: {name} takes {r['time_vs_full']:.2f}x the full model's time, "
                f"same class for {r['same_class']} of {len(images)}")
        infer["hits_per_pass"] = cached.hits // a.bench_epochs
        infer["misses_per_pass"] = cached.misses // a.bench_epochs

    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"world": world, "threads": torch.get_num_threads(), "train": a.train,
                       "test": a.test, "epochs": a.epochs, "batch": a.batch, "width": a.width,
                       "codec": a.codec, "build_s": build_s, "runs": results,
                       "loader_bench": bench, "inference": infer}, f, indent=1)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
