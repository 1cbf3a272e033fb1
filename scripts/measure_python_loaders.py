#!/usr/bin/env python3
"""The ways docs/python.md offers to feed a training loop from the cache, side by side: the
example's ResNet-18 head (layer3, layer4, pool, fc) trained on Fashion-MNIST activations of its
frozen first half, an epoch of each way in turn (so a change of the machine's load falls on all
alike), medians of the epochs after the first. The ways:

  DataLoader(CachedDataset, batch_size, shuffle=True, num_workers=W) for each W of --workers,
    batched reads (torch 2.x calls CachedDataset.__getitems__: one read per batch), and with
    persistent_workers=True for W > 0 (the workers and their readers kept between epochs);
  the same with per-item reads (__getitems__ hidden: what torch 1.13's DataLoader does);
  CachedLoader(batch_size, shuffle=True);
  the frozen prefix run in every step (no cache).

Also times recycle.build at each --build-batch (the default batch_size's choice).

    python3 scripts/measure_python_loaders.py [--train 5000] [--epochs 4] [--workers 0 2]
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from finetune_resnet18 import Run, fashion, resnet18  # noqa: E402

import recycle  # noqa: E402


class ItemReads(recycle.CachedDataset):
    """CachedDataset without __getitems__: a DataLoader reads it one item at a time."""
    __getitems__ = None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", type=int, default=5000)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    p.add_argument("--build-batch", type=int, nargs="+", default=[64, 256])
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores: {cpu}")
    torch.manual_seed(0)
    prefix, head0 = resnet18(a.width)
    prefix.eval().requires_grad_(False)
    train = fashion("train", a.train)
    with tempfile.TemporaryDirectory() as tmp:
        build_s = {}
        for rounds in range(3):
            for b in a.build_batch:
                start = time.perf_counter()
                recycle.build(f"{tmp}/b{b}-{rounds}", train, prefix, batch_size=b, progress=False)
                build_s.setdefault(b, []).append(time.perf_counter() - start)
        for b, t in build_s.items():
            print(f"recycle.build batch_size={b:4d}: {statistics.median(t):.2f} s "
                  f"(runs {', '.join(f'{x:.2f}' for x in t)})")
        cache = f"{tmp}/b{a.build_batch[0]}-0"
        ds, items = recycle.CachedDataset(cache), ItemReads(cache)

        def loader(data, workers, persistent=False):
            if persistent:  # one DataLoader for every epoch: its workers and their readers stay
                kept = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True,
                                                   num_workers=workers, persistent_workers=True)
                return lambda e: kept
            return lambda e: torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True,
                                                         num_workers=workers)

        runs = {}
        for w in a.workers:
            runs[f"DataLoader(CachedDataset), workers={w}, batched reads"] = Run(copy.deepcopy(head0), loader(ds, w), 0.05)
            runs[f"DataLoader(CachedDataset), workers={w}, item reads"] = Run(copy.deepcopy(head0), loader(items, w), 0.05)
            if w > 0:
                runs[f"DataLoader(CachedDataset), workers={w}, persistent"] = Run(copy.deepcopy(head0), loader(ds, w, True), 0.05)
        cl = recycle.CachedLoader(cache, batch_size=a.batch, shuffle=True)
        runs["CachedLoader"] = Run(copy.deepcopy(head0), lambda e: cl, 0.05)
        runs["frozen prefix run every step"] = Run(copy.deepcopy(head0), loader(train, 0), 0.05, prefix=prefix)
        for _ in range(a.epochs):
            for run in runs.values():
                run.run_epoch()
        base = statistics.median(runs["frozen prefix run every step"].times[1:])
        print(f"{'way':58s} median epoch s  (epochs after the first)   speedup over the online prefix")
        for name, run in runs.items():
            m = statistics.median(run.times[1:])
            print(f"{name:58s} {m:6.2f}  ({' '.join(f'{t:.2f}' for t in run.times[1:])})   {base / m:.2f}x")


if __name__ == "__main__":
    main()
