#!/usr/bin/env python3
"""The Embedding Recycling table on a deep encoder: for each k of --k (default 3, 6, 9 and 12
of all-mpnet-base-v2's 12 layers), the head trained from records of the first k layers, beside
the same head with those layers run online and beside full fine-tuning, and the cost
recycle.hf.profile predicted for each k before anything was trained.

    python bench/er_table.py --data data/wordnet-supersenses [--model all-mpnet-base-v2]
        [--k 3 6 9 12] [--seeds 0 1 2] [--train 800] [--test 500] [--epochs 2] [--out DIR]

One process per seed (`--seed S --json FILE` runs one): it loads the model, asks
recycle.hf.profile for its predictions on the seed's training texts, builds one cache per k
(recycle.build, records as long as the text) and trains, each epoch in turn so a change of the
machine's load falls on all alike: full fine-tuning (embeddings and every layer), and for each
k the head from its cache (recycle.CachedLoader) and the head with the prefix run online
(no_grad, every step), all from the same pretrained weights and the same new classifier, AdamW
(--lr for the pretrained layers, --head-lr for the classifier), batch --batch. Then test accuracy
and macro F1. The table: accuracy (mean +- sd over the seeds), the head epoch's speedup over
full fine-tuning and over the online prefix (medians over the seeds of each run's own ratio),
measured beside predicted, and the records' bytes a text, measured beside predicted. --out DIR
writes er-table.md, er-table.json and er-table.svg (accuracy against the measured speedup);
--merge DIR... --out DIR makes the table of seeds run apart (each with its own --seeds and --out).
The data: any folder of train.tsv and test.tsv, label<TAB>text (scripts/fetch_wordnet_task.sh,
scripts/fetch_debian_task.sh). Needs transformers and the model's PyPI packages
(scripts/torch2_venv.sh's venv has them).
"""
import argparse
import copy
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from site-packages only
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import bench_report  # noqa: E402
import finetune_minilm as example  # noqa: E402
import recycle  # noqa: E402
import recycle.hf  # noqa: E402


def split_at(model, k, classes, seed):
    """(prefix, head) of a copy of `model` cut at k, the head's new classifier drawn from `seed`
    (the same classifier at every k)."""
    torch.manual_seed(seed)
    return recycle.hf.split(copy.deepcopy(model), k, num_labels=classes)


def build_caches(a, model, ks, names, texts):
    """One cache per k of the training and test texts: {k: (cache, prefix, head0, build s)}."""
    cut = functools.partial(a.tokenizer, max_length=a.tokens)
    caches = {}
    for k in ks:
        prefix, head0 = split_at(model, k, len(names), a.seed)
        prefix.eval().requires_grad_(False)
        head0.eval()
        cache = os.path.join(a.work, f"k{k}")
        start = time.perf_counter()
        for split, (x, y) in texts.items():
            recycle.build(cache, list(zip(x, y)), prefix, tokenizer=cut, split=split,
                          codec=a.codec, classes=names, batch_size=a.batch)
        caches[k] = (cache, prefix, head0, time.perf_counter() - start)
        print(f"k={k}: built {cache} in {caches[k][3]:.1f} s", flush=True)
    return caches


def make_runs(a, model, caches, names, tokens_loader):
    """Full fine-tuning, then for each k the cached head and the online one."""
    full_prefix, full_head = split_at(model, 0, len(names), a.seed)
    full = nn.ModuleDict({"prefix": full_prefix, "head": full_head})
    runs = [example.Run("full fine-tuning", full, tokens_loader,
                        lambda x: full_head(full_prefix(x)), a.lr, a.head_lr)]
    runs[0].k, runs[0].kind = None, "full"
    for k, (cache, prefix, head0, _) in caches.items():
        head = copy.deepcopy(head0)
        loader = recycle.CachedLoader(cache, "train", batch_size=a.batch, shuffle=True, seed=a.seed)
        cached = example.Run(f"cached k={k}", head, functools.partial(lambda l, e: l, loader), head,
                             a.lr, a.head_lr)
        cached.k, cached.kind, cached.cache = k, "cached", cache
        online_head = copy.deepcopy(head0)

        def online(x, prefix=prefix, head=online_head):
            with torch.no_grad():
                o = prefix(x)
            return head(o)

        run = example.Run(f"online k={k}", online_head, tokens_loader, online, a.lr, a.head_lr)
        run.k, run.kind = k, "online"
        runs += [cached, run]
    return runs


def evaluate(a, run, test_texts, test_y, classes):
    run.model.eval()
    cut = functools.partial(a.tokenizer, max_length=a.tokens)
    with torch.no_grad():
        if run.kind == "cached":
            test = recycle.CachedLoader(run.cache, "test", batch_size=64, shuffle=False)
        else:
            test = ((dict(cut(test_texts[i:i + 64], padding=True, truncation=True,
                              return_tensors="pt")),
                     torch.tensor(test_y[i:i + 64])) for i in range(0, len(test_y), 64))
        preds, ys = zip(*[(run.forward(x).argmax(1), y) for x, y in test])
    pred, y = torch.cat(preds), torch.cat(ys)
    return {"test_acc": float((pred == y).float().mean()), "f1": example.f1_of(pred, y, classes),
            "epoch_s": run.times, "median_epoch_s": example.later_epochs(run.times)}


def one_seed(a):
    """One seed's runs: its JSON (predictions, every run's figures)."""
    if a.threads:
        torch.set_num_threads(a.threads)
    a.tokenizer, model, n_layers = example.load_model(a.model)
    ks = a.k
    if not all(0 <= k <= n_layers for k in ks):
        raise SystemExit(f"--k {ks}: each between 0 and {n_layers}")
    train_x, train_y, names = example.read_tsv(os.path.join(a.data, "train.tsv"), a.train, a.seed)
    test_x, test_y, _ = example.read_tsv(os.path.join(a.data, "test.tsv"), a.test, a.seed)
    print(f"{a.model} ({n_layers} layers), k = {ks}, seed {a.seed}: {len(train_y)} training and "
          f"{len(test_y)} test texts, {len(names)} classes; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads", flush=True)
    start = time.perf_counter()
    predicted = recycle.hf.profile(model, a.tokenizer, train_x + test_x, batch_size=a.batch,
                                   max_length=a.tokens, batches=a.profile_batches, codec=a.codec)
    profile_s = time.perf_counter() - start
    texts = {"train": (train_x, train_y), "test": (test_x, test_y)}
    caches = build_caches(a, model, ks, names, texts)
    encoded = [a.tokenizer(t, truncation=True, max_length=a.tokens) for t in train_x]

    def tokens_loader(epoch):  # the texts' tokens, each batch padded to its longest
        g = torch.Generator().manual_seed(a.seed * 1000 + epoch)
        order = torch.randperm(len(train_y), generator=g)
        return ((dict(a.tokenizer.pad([encoded[i] for i in b], return_tensors="pt")),
                 torch.tensor([train_y[i] for i in b])) for b in order.split(a.batch)
                for b in [b.tolist()])

    runs = make_runs(a, model, caches, names, tokens_loader)
    for epoch in range(a.epochs):
        for run in runs:
            run.run_epoch(epoch)
        print(f"epoch {epoch}: " + ", ".join(f"{r.name} {r.times[-1]:.1f} s" for r in runs),
              flush=True)
    results = {}
    for run in runs:
        results[run.name] = dict(evaluate(a, run, test_x, test_y, len(names)), k=run.k,
                                 kind=run.kind)
        if run.kind == "cached":
            info = recycle.inspect(run.cache)
            results[run.name].update(build_s=caches[run.k][3],
                                     bytes=info["record_bytes"] / max(info["records"], 1))
        print(f"{run.name}: test acc {results[run.name]['test_acc']:.4f}, median epoch "
              f"{results[run.name]['median_epoch_s']:.2f} s", flush=True)
    return {"model": a.model, "layers": n_layers, "data": a.data, "classes": names,
            "train": len(train_y), "test": len(test_y), "tokens": a.tokens, "epochs": a.epochs,
            "batch": a.batch, "seed": a.seed, "codec": a.codec, "threads": torch.get_num_threads(),
            "profile_s": profile_s, "texts_profiled": len(train_x) + len(test_x),
            "predicted": predicted, "runs": results}


def mean_sd(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def table(seeds):
    """One row per k (and one for full fine-tuning) over the seeds' runs."""
    first = seeds[0]
    rows = []
    full = [s["runs"]["full fine-tuning"] for s in seeds]
    rows.append({"k": None, "run": "full fine-tuning",
                 "acc": mean_sd([r["test_acc"] for r in full]),
                 "f1": mean_sd([r["f1"] for r in full]),
                 "epoch_s": statistics.median(r["median_epoch_s"] for r in full)})
    for k in sorted({r["k"] for r in first["runs"].values() if r["k"] is not None}):
        for kind in ("cached", "online"):
            name = f"{kind} k={k}"
            runs = [s["runs"][name] for s in seeds]
            ratio = lambda base: statistics.median(  # noqa: E731
                s["runs"][base]["median_epoch_s"] / s["runs"][name]["median_epoch_s"]
                for s in seeds)
            pred = [next(p for p in s["predicted"] if p["k"] == k) for s in seeds]
            row = {"k": k, "run": name, "acc": mean_sd([r["test_acc"] for r in runs]),
                   "f1": mean_sd([r["f1"] for r in runs]),
                   "epoch_s": statistics.median(r["median_epoch_s"] for r in runs),
                   "vs_full": ratio("full fine-tuning")}
            if kind == "cached":
                row.update(vs_online=ratio(f"online k={k}"),
                           predicted_vs_full=statistics.median(p["vs_full"] for p in pred),
                           predicted_vs_online=statistics.median(p["vs_online"] for p in pred),
                           bytes=statistics.median(r["bytes"] for r in runs),
                           predicted_bytes=statistics.median(
                               p["cache_bytes"] / s["texts_profiled"] for p, s in zip(pred, seeds)),
                           build_s=statistics.median(r["build_s"] for r in runs))
            else:
                row["predicted_vs_full"] = statistics.median(p["full_s"] / p["online_s"]
                                                             for p in pred)
            rows.append(row)
    return rows


def markdown(seeds, rows, cpu):
    first = seeds[0]
    full_acc = rows[0]["acc"][0]
    task = os.path.basename(first['data'].rstrip('/'))
    lines = [f"{first['model']} ({first['layers']} layers) on {task}: {first['train']} training "
             f"and {first['test']} test texts, {len(first['classes'])} classes, cut at "
             f"{first['tokens']} tokens, {first['epochs']} epochs, batch "
             f"{first['batch']}, {first['codec']} records, seeds "
             f"{[s['seed'] for s in seeds]}, {first['threads']} threads; {cpu}", "",
             "| run | test acc | vs full (points) | macro F1 | median epoch s | vs full: measured "
             "(predicted) | vs online: measured (predicted) | bytes/text: measured (predicted) "
             "| build s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        acc = f"{100 * r['acc'][0]:.2f} +- {100 * r['acc'][1]:.2f}"
        diff = "" if r["k"] is None else f"{100 * (r['acc'][0] - full_acc):+.2f}"
        vs_full = "" if r["k"] is None else f"{r['vs_full']:.2f}x ({r['predicted_vs_full']:.2f}x)"
        if r["run"].startswith("cached"):
            rest = (f"{r['vs_online']:.2f}x ({r['predicted_vs_online']:.2f}x) | {r['bytes']:.0f} "
                    f"({r['predicted_bytes']:.0f}) | {r['build_s']:.1f}")
        else:
            rest = " | | "
        lines.append(f"| {r['run']} | {acc} | {diff} | {100 * r['f1'][0]:.2f} | {r['epoch_s']:.1f} "
                     f"| {vs_full} | {rest} |")
    return "\n".join(lines) + "\n"


def svg(rows, title):
    """Test accuracy against the measured epoch speedup over full fine-tuning, a point a run."""
    w, h, m = 640, 420, 60
    pts = [(1.0 if r["k"] is None else r["vs_full"], 100 * r["acc"][0], 100 * r["acc"][1], r)
           for r in rows]
    x1 = max(p[0] for p in pts) * 1.1
    y0 = min(p[1] - p[2] for p in pts) - 1
    y1 = max(p[1] + p[2] for p in pts) + 1
    px = lambda x: m + x / x1 * (w - 2 * m)  # noqa: E731
    py = lambda y: h - m - (y - y0) / (y1 - y0) * (h - 2 * m)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
           f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 15}" text-anchor="middle">epoch speedup over full '
           f'fine-tuning (x), measured</text>',
           f'<text x="15" y="{h / 2}" text-anchor="middle" transform="rotate(-90 15 {h / 2})">'
           f'test accuracy (%)</text>']
    for i in range(5):
        out.append(f'<text x="{px(x1 * i / 4):.1f}" y="{h - m + 16}" text-anchor="middle">'
                   f'{x1 * i / 4:.1f}</text>')
        y = y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{m - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.1f}</text>')
    for x, y, sd, r in pts:
        color = {"cached": "#1f77b4", "online": "#2ca02c"}.get(r["run"].split()[0], "#d62728")
        out.append(f'<line x1="{px(x):.1f}" y1="{py(y - sd):.1f}" x2="{px(x):.1f}" '
                   f'y2="{py(y + sd):.1f}" stroke="{color}"/>')
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="{color}"/>')
        out.append(f'<text x="{px(x) + 7:.1f}" y="{py(y) - 6:.1f}">{r["run"]}</text>')
    return "\n".join(out + ["</svg>"]) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="folder of train.tsv and test.tsv (label<TAB>text)")
    p.add_argument("--model", default="all-mpnet-base-v2")
    p.add_argument("--k", type=int, nargs="+", default=[3, 6, 9, 12])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--seed", type=int, help="run this one seed in this process (with --json)")
    p.add_argument("--train", type=int, default=800, help="training texts drawn (0: all)")
    p.add_argument("--test", type=int, default=500, help="test texts drawn (0: all)")
    p.add_argument("--tokens", type=int, default=64, help="where texts are cut, in tokens")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-5, help="the pretrained layers' learning rate")
    p.add_argument("--head-lr", type=float, default=1e-3, help="the new classifier's")
    p.add_argument("--codec", default="fp16")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--profile-batches", type=int, default=4,
                   help="batches recycle.hf.profile times")
    p.add_argument("--json", help="(with --seed) write that seed's figures here")
    p.add_argument("--out", help="write er-table.md, er-table.json and er-table.svg here")
    p.add_argument("--merge", nargs="+", metavar="DIR",
                   help="no runs: the table of the seeds in these --out folders' er-table.json "
                        "(seeds run apart, e.g. on two cores)")
    a = p.parse_args()
    if a.merge:
        seeds = []
        for folder in a.merge:
            with open(os.path.join(folder, "er-table.json")) as f:
                seeds += json.load(f)["seeds"]
        write_table(sorted(seeds, key=lambda s: s["seed"]), a.out)
        return
    if not a.data:
        p.error("--data is required (or --merge)")
    if a.seed is not None:
        with tempfile.TemporaryDirectory() as a.work:
            result = one_seed(a)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f)
        return
    seeds = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in a.seeds:
            out = os.path.join(tmp, f"seed{seed}.json")
            cmd = [sys.executable, os.path.abspath(__file__), *strip_option(sys.argv[1:], "--out"),
                   "--seed", str(seed), "--json", out]
            print("$ " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
            subprocess.run(cmd, check=True, stdout=sys.stderr)
            with open(out) as f:
                seeds.append(json.load(f))
    write_table(seeds, a.out)


def write_table(seeds, out):
    """Prints the seeds' table and writes it to `out` (when given) with the figures and the
    plot."""
    cpu = bench_report.cpu_name()
    rows = table(seeds)
    text = markdown(seeds, rows, cpu)
    print(text, end="")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "er-table.md"), "w") as f:
            f.write(text)
        with open(os.path.join(out, "er-table.json"), "w") as f:
            json.dump({"cpu": cpu, "seeds": seeds, "table": rows}, f, indent=1)
        first = seeds[0]
        title = f"{first['model']} on {os.path.basename(first['data'].rstrip('/'))}, {cpu}"
        with open(os.path.join(out, "er-table.svg"), "w") as f:
            f.write(svg(rows, title))


def strip_option(argv, name):
    """argv without `name` and its value (the seeds' processes write no table)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out


if __name__ == "__main__":
    main()
