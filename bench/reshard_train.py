#!/usr/bin/env python3
"""Shards built once at 8, trained at W = 8, 4 and 2 after recycle-reshard, against one shared
cache trained by as many ranks: nothing is computed again, and the accuracy stays the shared
cache's.

Builds Fashion-MNIST classes 5-9 (LIMIT training samples, the whole test split of those classes)
through a width-16 ResNet-18 cut at 0.5 (random weights, --seed 0): once as one cache, once as
8 shards (recycle-build --sharded --nproc 8). Reshards 8 -> 4 and 8 -> 2 (recycle-reshard, 8
ranks each: `computed` 0). Then for each W and seed trains the head from the W shards
(--sharded --nproc W) and from the one cache (--nproc W), the same epochs, batch and seed.
Prints one JSON object (every run, the means, the CPU) and writes it to --out.

    /usr/bin/python3 bench/reshard_train.py --tools build [--limit 5000] [--seeds 0 1 2] [--out F]
"""
import argparse
import json
import os
import statistics
import tempfile

from reshard_rate import cpu_name, run_json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", default="build")
    ap.add_argument("--limit", type=int, default=5000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    tool = lambda name: os.path.join(a.tools, name)  # noqa: E731
    model = ["--model", "resnet18", "--width", "16", "--recycle", "0.5", "--seed", "0"]
    report = {"cpu": cpu_name(), "cores": os.cpu_count(), "limit": a.limit, "epochs": a.epochs,
              "reshards": {}, "runs": []}
    with tempfile.TemporaryDirectory(prefix="reshard-train-") as d:
        one, eight = os.path.join(d, "one"), os.path.join(d, "s8-{rank}")
        for split, limit in (("train", ["--limit", str(a.limit)]), ("test", [])):
            data = ["--data", "fashion-mnist", "--classes", "5-9", "--split", split] + limit
            run_json([tool("recycle-build")] + data + model + ["--cache", one, "--json"])
            run_json([tool("recycle-build")] + data + model +
                     ["--nproc", "8", "--sharded", "--cache", eight, "--json"])
        shards = {8: eight}
        for w in (4, 2):
            shards[w] = os.path.join(d, "s%d-{rank}" % w)
            r = run_json([tool("recycle-reshard"), "--cache", eight, "--to", shards[w],
                          "--shards", str(w), "--nproc", "8", "--json"])
            report["reshards"][str(w)] = {
                "computed": r["computed"],
                "move_seconds": max(p["move_seconds"] for p in r["per_rank"]),
                "bytes_moved": sum(p["bytes_sent"] for p in r["per_rank"])}
        for w in (8, 4, 2):
            for seed in a.seeds:
                train = ["--epochs", str(a.epochs), "--batch", "128", "--seed", str(seed),
                         "--nproc", str(w), "--json"]
                shared = run_json([tool("recycle-train"), "--cache", one] + train)
                sharded = run_json([tool("recycle-train"), "--cache", shards[w], "--sharded"] +
                                   train)
                report["runs"].append({
                    "world": w, "seed": seed,
                    "shared_acc": shared["test_acc"], "sharded_acc": sharded["test_acc"],
                    "shared_epoch_s": statistics.median(shared["epoch_seconds"]),
                    "sharded_epoch_s": statistics.median(sharded["epoch_seconds"]),
                    "shared_steps": shared["steps"], "sharded_steps": sharded["steps"]})
    for w in (8, 4, 2):
        runs = [r for r in report["runs"] if r["world"] == w]
        shared = statistics.mean(r["shared_acc"] for r in runs)
        sharded = statistics.mean(r["sharded_acc"] for r in runs)
        report["W=%d" % w] = {"shared_mean": shared, "sharded_mean": sharded,
                              "points": 100 * (sharded - shared)}
    print(json.dumps(report))
    if a.out:
        with open(a.out, "w") as f:
            f.write(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
