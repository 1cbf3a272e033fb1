#!/usr/bin/env python3
"""A torch.export prefix against the same module scripted, side by side (docs/pytorch2.md).

    python bench/pt2_bench.py --tools DIR [--train 5000] [--test 1000] [--rounds 3] [--out DIR]

Run with the python of a torch >= 2.6 environment that has the package `recycle` of that torch
(the wheel's install, or a build tree on PYTHONPATH), torchvision and numpy (in the venv of
scripts/torch2_venv.sh: pip install torchvision==0.26.0 pillow); DIR holds the tools
(recycle-build, recycle-train, recycle-predict) of the same build. Fashion-MNIST (Debian's
dataset-fashion-mnist) as npy float32 inputs, normalised; torchvision's ResNet-18 with a
1-channel stem and 10 classes, random weights (seed 0; examples/export_torchvision.py):
  export   the prefix (conv1 .. layer3) written by recycle.export (prefix.pt2) and the whole
           Sequential scripted (model.ts, split at --recycle 0.75: the same layers);
  build    recycle-build --codec fp32 of the train split from each, in turns (the order swapped
           each round, --rebuild), 2 threads: samples a second, medians of --rounds;
  records  recycle.build of the same module in Python, and the largest difference of each cache's
           records from its records;
  read     an epoch of recycle.CachedLoader over each cache (batch 256): samples a second;
  serve    recycle-train of a linear head from the package's cache (3 epochs); a linear head
           trained in Python from it (3 epochs), exported with recycle.export(..., cache=) and
           served by recycle-predict --head head.pt2 over the test split (its rows checked
           against head(prefix(x)) in Python).
Prints one markdown table (and writes it, with every report, to --out).
"""
import argparse
import csv
import gzip
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import recycle
from bench_report import cpu_name, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
FASHION = "/usr/share/datasets/fashion-mnist"


def idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def write_npy(folder, train, test):
    """Fashion-MNIST's first `train` and `test` samples as normalised float32 npy."""
    os.makedirs(folder, exist_ok=True)
    out = {}
    for split, prefix, n in (("train", "train", train), ("test", "t10k", test)):
        x = idx(f"{FASHION}/{prefix}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[:n]
        y = idx(f"{FASHION}/{prefix}-labels-idx1-ubyte.gz", 8)[:n].astype(np.int64)
        x = ((x.astype(np.float32) / 255.0) - 0.2860) / 0.3530
        np.save(f"{folder}/{split}_x.npy", x)
        np.save(f"{folder}/{split}_y.npy", y)
        out[split] = (torch.from_numpy(x), torch.from_numpy(y))
    return out


def resnet18_sequential():
    spec = importlib.util.spec_from_file_location("export_torchvision",
                                                  f"{SOURCE}/examples/export_torchvision.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = argparse.Namespace(arch="resnet18", seed=0, state_dict=None, in_channels=1,
                              num_classes=10)
    return module.build(args)[1].eval()


def tool(tools, name, *args):
    r = subprocess.run([f"{tools}/{name}", *map(str, args), "--json"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"pt2_bench: {name} {' '.join(map(str, args))} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def loader_rate(cache):
    start, n = time.perf_counter(), 0
    for x, _ in recycle.CachedLoader(cache, "train", batch_size=256):
        n += len(x)
    return n / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", required=True, help="folder of recycle-build and the other tools")
    p.add_argument("--train", type=int, default=5000)
    p.add_argument("--test", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None, help="folder for the table and reports")
    a = p.parse_args()
    work = a.out or tempfile.mkdtemp(prefix="pt2-bench-")
    os.makedirs(work, exist_ok=True)
    data = write_npy(f"{work}/npy", a.train, a.test)
    seq = resnet18_sequential()
    prefix = seq[:7]  # conv1, bn1, relu, maxpool, layer1, layer2, layer3
    script, package = f"{work}/model.ts", f"{work}/prefix.pt2"
    torch.jit.script(seq).save(script)
    t = time.perf_counter()
    recycle.export(prefix, (data["train"][0][:4],), package)
    export_seconds = time.perf_counter() - t
    models = {"pt2": ["--model", f"pt2:{package}"],
              "torchscript": ["--model", f"torchscript:{script}", "--recycle", "0.75"]}
    common = ["--data", f"npy:{work}/npy", "--codec", "fp32", "--threads", "2"]
    rates = {k: [] for k in models}
    reports = []
    for r in range(a.rounds):
        for kind in (list(models) if r % 2 == 0 else list(models)[::-1]):
            rep = tool(a.tools, "recycle-build", *common, *models[kind], "--split", "train",
                       "--cache", f"{work}/cache-{kind}", "--rebuild")
            rates[kind].append(rep["samples"] / rep["seconds"])
            reports.append({"round": r, "kind": kind, "build": rep})
    for kind in models:
        tool(a.tools, "recycle-build", *common, *models[kind], "--split", "test", "--cache",
             f"{work}/cache-{kind}")
    x, y = data["train"]
    recycle.build(f"{work}/cache-python", list(zip(x, y.tolist())), prefix, codec="fp32",
                  rebuild=True)
    ours = recycle.CachedDataset(f"{work}/cache-python", "train")
    want = torch.stack([ours[i][0] for i in range(len(ours))])
    diff = {}
    for kind in models:
        ds = recycle.CachedDataset(f"{work}/cache-{kind}", "train")
        diff[kind] = (torch.stack([ds[i][0] for i in range(len(ds))]) - want).abs().max().item()
    read = {k: statistics.median(loader_rate(f"{work}/cache-{k}") for _ in range(a.rounds))
            for k in models}

    trained = tool(a.tools, "recycle-train", "--cache", f"{work}/cache-pt2", *models["pt2"],
                   "--epochs", "3", "--threads", "2")
    torch.manual_seed(0)
    features = want.shape[1:]
    head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(want[0].numel(), 10))
    opt = torch.optim.Adam(head.parameters(), lr=1e-3)
    for _ in range(3):
        for xb, yb in recycle.CachedLoader(f"{work}/cache-pt2", "train", batch_size=128,
                                           shuffle=True):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(head(xb), yb).backward()
            opt.step()
    head.eval()
    recycle.export(head, (torch.zeros((4,) + tuple(features)),), f"{work}/head.pt2",
                   cache=f"{work}/cache-pt2")
    served = tool(a.tools, "recycle-predict", "--cache", f"{work}/cache-pt2", "--head",
                  f"{work}/head.pt2", *models["pt2"], "--data", f"npy:{work}/npy", "--split",
                  "test", "--out", f"{work}/rows.csv")
    with open(f"{work}/rows.csv") as f:
        rows = list(csv.DictReader(f))
    got = torch.tensor([[float(row[f"p_{c}"]) for c in range(10)] for row in rows])
    with torch.no_grad():
        expected = torch.softmax(head(prefix(data["test"][0])), 1)
    rows_diff = (got - expected).abs().max().item()

    cpu = cpu_name()
    med = {k: statistics.median(v) for k, v in rates.items()}
    lines = [
        f"torch {torch.__version__}, {cpu}, {os.cpu_count()} cores; ResNet-18 (1-channel stem, "
        f"random weights) up to layer3, Fashion-MNIST npy float32, {a.train} train / {a.test} "
        f"test, fp32 records, medians of {a.rounds} rounds",
        "",
        "| figure | pt2 (recycle.export) | TorchScript (same module) | pt2 / TorchScript |",
        "| --- | --- | --- | --- |",
        f"| build, samples/s (2 threads) | {med['pt2']:.0f} | {med['torchscript']:.0f} | "
        f"{med['pt2'] / med['torchscript']:.2f}x |",
        f"| read (CachedLoader epoch), samples/s | {read['pt2']:.0f} | {read['torchscript']:.0f} "
        f"| {read['pt2'] / read['torchscript']:.2f}x |",
        f"| records: largest difference from recycle.build's | {diff['pt2']:.2e} | "
        f"{diff['torchscript']:.2e} | |",
        "",
        f"export (torch.export + AOTInductor compile of the prefix): {export_seconds:.0f} s; "
        f"build rates per round: pt2 {[round(v) for v in rates['pt2']]}, TorchScript "
        f"{[round(v) for v in rates['torchscript']]}",
        f"recycle-train --cache (package's cache, linear head, 3 epochs): test accuracy "
        f"{trained['test_acc']:.4f}",
        f"recycle-predict --head head.pt2 (a linear head trained in Python, 3 epochs): accuracy "
        f"{served['accuracy']:.4f}, {served['hits']} hits, {served['samples_per_s']:.0f} "
        f"samples/s; rows against head(prefix(x)): largest difference {rows_diff:.2e}",
    ]
    write_results(work, "pt2_bench.md", lines, "reports.json",
                  {"builds": reports, "train": trained, "predict": served})


if __name__ == "__main__":
    main()
