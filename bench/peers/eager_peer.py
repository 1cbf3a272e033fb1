#!/usr/bin/python3
"""The eager-PyTorch peer of recycle-bench: what a user would write instead of the engine.

It builds the engine's width-16 ResNet-18 for 28x28 gray images (engine/block_model.cc: 8
blocks layer1.0..layer4.1, the stem travelling with layer1.0, a mean-pool + Linear classifier),
reads Fashion-MNIST from Debian's IDX .gz files, and times, on the same samples:

  full    full fine-tuning of the whole model, --epochs epochs;
  prefix  one pass of the frozen prefix (first 4 of 8 blocks, layer1.0..layer2.1) in eval mode
          under torch.no_grad() over every sample in batches of 256, outputs kept in memory
          (the peer's equivalent of building a cache);
  head    training the head (layer3.0..layer4.1 + classifier) from those in-memory
          activations for --epochs epochs;
  infer   (--infer-only) full-model inference: eval mode, torch.no_grad(), batches of 256,
          argmax and softmax of every sample (recycle-bench --predict's peer row).

The training step matches the engine's (engine/trainer.cc): cosine learning rate set per step,
zero_grad, forward, cross-entropy, backward, SGD step (lr 0.05, Nesterov momentum 0.9, weight
decay 5e-4), then loss.item() and an argmax accuracy count. Samples are reshuffled every epoch
with a generator seeded by seed * 1000003 + epoch; the last partial batch is kept.

Run with Debian's interpreter: /usr/bin/python3 bench/peers/eager_peer.py [options]
The last line of stdout is one JSON object (see bench/peers/README.md). Errors: one line on
stderr, exit status 1 (argparse usage errors: exit status 2).
"""

import argparse
import contextlib
import gzip
import json
import math
import os
import re
import statistics
import struct
import sys
import time

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
PIXEL_MEAN = 0.2860
PIXEL_STD = 0.3530
RATIO = 0.5
PREFIX_BATCH = 256
WIDTH = 16
# The class names recycle writes into its weights files (engine/data/dataset.cc).
FASHION_MNIST_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                       "Sneaker", "Bag", "Ankle boot"]


class PeerError(Exception):
    """An error reported as one line on stderr with exit status 1."""


# ---- data -----------------------------------------------------------------------------------

def read_idx(path, want_dims):
    """Reads a gzip'd IDX file of unsigned bytes; returns (dims, numpy uint8 array)."""
    import numpy as np
    if not os.path.isfile(path):
        raise PeerError("missing data file " + path + " (install Debian's fashion-mnist data or pass --data-dir)")
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise PeerError("cannot read " + path + ": " + str(e))
    if len(raw) < 4:
        raise PeerError(path + ": too short for an IDX header")
    magic = struct.unpack(">I", raw[:4])[0]
    expected_magic = 0x00000800 | want_dims
    if magic != expected_magic:
        raise PeerError("%s: magic 0x%08x, expected 0x%08x (an IDX file of %d-d unsigned bytes)"
                        % (path, magic, expected_magic, want_dims))
    header = 4 + 4 * want_dims
    if len(raw) < header:
        raise PeerError(path + ": truncated IDX header")
    dims = struct.unpack(">" + "I" * want_dims, raw[4:header])
    count = 1
    for d in dims:
        count *= d
    if len(raw) - header != count:
        raise PeerError("%s: %d data bytes, the header says %d" % (path, len(raw) - header, count))
    return dims, np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def parse_classes(text):
    """'5-9' or '0,2,4' or '0-2,7' -> sorted list of class ids (like engine/dataset.cc)."""
    if not re.fullmatch(r"\d{1,6}(-\d{1,6})?(,\d{1,6}(-\d{1,6})?)*", text):
        raise PeerError("--classes '%s': expected a list like 5-9 or 0,2,4" % text)
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        lo, hi = int(lo), int(hi or lo)
        if hi < lo:
            raise PeerError("--classes '%s': expected a list like 5-9 or 0,2,4" % text)
        out.update(range(lo, hi + 1))
    return sorted(out)


def load_train_split(data_dir, classes, limit, files="train"):
    """The train split (files "train"; the test split: "t10k") filtered to `classes`
    (relabelled by rank), then the first `limit` (0 = all). Returns (images uint8 numpy
    [n, 28, 28], labels int64 numpy [n])."""
    import numpy as np
    idims, images = read_idx(os.path.join(data_dir, files + "-images-idx3-ubyte.gz"), 3)
    ldims, labels = read_idx(os.path.join(data_dir, files + "-labels-idx1-ubyte.gz"), 1)
    if idims[0] != ldims[0]:
        raise PeerError("%s: %d images but %d labels" % (data_dir, idims[0], ldims[0]))
    if labels.size and int(labels.max()) > 9:
        raise PeerError(data_dir + ": a label is not a Fashion-MNIST class (0-9)")
    for c in classes:
        if c > 9:
            raise PeerError("--classes names class %d, but the data has classes 0-9" % c)
    remap = np.full(10, -1, dtype=np.int64)
    for rank, c in enumerate(classes):
        remap[c] = rank
    new_labels = remap[labels]
    keep = np.nonzero(new_labels >= 0)[0]
    if limit > 0:
        keep = keep[:limit]
    if keep.size == 0:
        raise PeerError("no samples left in " + data_dir + " after --classes")
    return images[keep], new_labels[keep]


# ---- model (engine/block_model.cc) ----------------------------------------------------------

def build_model(torch, width, classes):
    nn = torch.nn

    def conv3x3(cin, cout, stride):
        return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = conv3x3(cin, cout, stride)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = conv3x3(cout, cout, 1)
            self.bn2 = nn.BatchNorm2d(cout)
            if stride != 1 or cin != cout:
                self.down_conv = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
                self.down_bn = nn.BatchNorm2d(cout)
            else:
                self.down_conv = None
                self.down_bn = None

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            shortcut = self.down_bn(self.down_conv(x)) if self.down_conv is not None else x
            return torch.relu(y + shortcut)

    class StemBlock(nn.Module):
        """Stem (3x3 conv stride 1, BN, ReLU; no max pool) followed by a BasicBlock."""

        def __init__(self, cin, w):
            super().__init__()
            self.stem_conv = conv3x3(cin, w, 1)
            self.stem_bn = nn.BatchNorm2d(w)
            self.block = BasicBlock(w, w, 1)

        def forward(self, x):
            return self.block(torch.relu(self.stem_bn(self.stem_conv(x))))

    class Classifier(nn.Module):
        def __init__(self, features, k):
            super().__init__()
            self.fc = nn.Linear(features, k)

        def forward(self, x):
            return self.fc(x.mean(dim=(2, 3)))

    def init_weights(module):
        for m in module.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    w = width
    blocks = [("layer1.0", StemBlock(1, w)), ("layer1.1", BasicBlock(w, w, 1))]
    cin = w
    for stage in (2, 3, 4):
        cout = w << (stage - 1)
        blocks.append(("layer%d.0" % stage, BasicBlock(cin, cout, 2)))
        blocks.append(("layer%d.1" % stage, BasicBlock(cout, cout, 1)))
        cin = cout
    for _, b in blocks:
        init_weights(b)
    return blocks, Classifier(cin, classes)


# ---- training (engine/trainer.cc) -----------------------------------------------------------

def train(torch, module, inputs, labels, epochs, batch, seed, lr=0.05, profile_to=None, bf16=False):
    """Trains `module` (all parameters that require grad) on inputs [n, ...] / labels [n];
    returns the wall seconds of each epoch and the last epoch's (loss, accuracy).
    With bf16, the forward runs under torch.autocast("cpu", dtype=torch.bfloat16) and the loss
    on fp32 logits (the engine's --precision bf16).
    With profile_to, the second epoch (the only one if there is one) runs under the legacy
    autograd profiler, its steps in the engine's scopes (step.load, step.forward,
    step.backward, step.optimizer; engine/train/trainer.h), and its Chrome trace is written
    there."""
    profiled_epoch = (1 if epochs > 1 else 0) if profile_to else -1

    def scope(name, epoch):
        if epoch != profiled_epoch:
            return contextlib.nullcontext()
        return torch.autograd.profiler.record_function(name)
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    loss_fn = torch.nn.functional.cross_entropy
    n = inputs.shape[0]
    steps_per_epoch = (n + batch - 1) // batch
    total = steps_per_epoch * epochs
    step = 0
    seconds = []
    last = (0.0, 0.0)
    module.train()
    for epoch in range(epochs):
        prof = None
        if epoch == profiled_epoch:
            prof = torch.autograd.profiler.profile(use_kineto=False)
            prof.__enter__()
        start = time.perf_counter()
        gen = torch.Generator()
        gen.manual_seed(seed * 1000003 + epoch)
        order = torch.randperm(n, generator=gen)
        loss_sum, correct, seen = 0.0, 0, 0
        for b in range(0, n, batch):
            with scope("step.load", epoch):
                idx = order[b:b + batch]
                x = inputs.index_select(0, idx)
                y = labels.index_select(0, idx)
            cur_lr = 0.5 * lr * (1.0 + math.cos(math.pi * step / total))
            step += 1
            for g in opt.param_groups:
                g["lr"] = cur_lr
            with scope("step.forward", epoch):
                opt.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    logits = module(x)
                logits = logits.float()
                loss = loss_fn(logits, y)
            with scope("step.backward", epoch):
                loss.backward()
            with scope("step.optimizer", epoch):
                opt.step()
            k = y.shape[0]
            loss_sum += loss.item() * k
            correct += int(logits.argmax(1).eq(y).sum().item())
            seen += k
        seconds.append(time.perf_counter() - start)
        if prof is not None:
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(profile_to)
        last = (loss_sum / seen, correct / seen)
    return seconds, last


def main():
    parser = argparse.ArgumentParser(
        description="Eager-PyTorch peer for recycle-bench: times full fine-tuning, one frozen-"
                    "prefix pass kept in memory, and head training from it, for the engine's "
                    "width-16 ResNet-18 on Fashion-MNIST. Prints one JSON object as the last "
                    "line of stdout.")
    parser.add_argument("--classes", default="5-9",
                        help="classes to keep, relabelled 0..k-1 in order (default: 5-9)")
    parser.add_argument("--limit", type=int, default=5000,
                        help="first N samples of the train split after --classes, 0 = all (default: 5000)")
    parser.add_argument("--epochs", type=int, default=3,
                        help="epochs of full and of head training (default: 3)")
    parser.add_argument("--batch", type=int, default=128, help="samples per training step (default: 128)")
    parser.add_argument("--threads", type=int, default=2,
                        help="torch.set_num_threads, 0 = every core (default: 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and shuffling (default: 0)")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                        help="directory of the Fashion-MNIST IDX .gz files (default: %s)" % DEFAULT_DATA_DIR)
    parser.add_argument("--prefix-only", action="store_true",
                        help="time only the no-grad prefix pass (no full fine-tuning, no head "
                             "training; their fields are left out of the JSON)")
    parser.add_argument("--head-only", action="store_true",
                        help="skip full fine-tuning: time the prefix pass and head training in a "
                             "process that has done nothing else (their fields only in the JSON)")
    parser.add_argument("--infer-only", action="store_true",
                        help="time only full-model inference (eval mode, no_grad, batches of 256) "
                             "over the samples")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="arithmetic of the training forward: fp32, or bf16 under "
                             "torch.autocast (the engine's --precision) (default: fp32)")
    parser.add_argument("--profile", metavar="DIR", default="",
                        help="write Chrome traces of the second epoch of full fine-tuning and of "
                             "head training (legacy autograd profiler) to DIR/peer-full.json and "
                             "DIR/peer-head.json")
    args = parser.parse_args()

    if args.limit < 0:
        raise PeerError("--limit must be 0 (all) or positive")
    if args.epochs < 1:
        raise PeerError("--epochs must be at least 1")
    if args.batch < 1:
        raise PeerError("--batch must be at least 1")
    if args.threads < 0:
        raise PeerError("--threads must be 0 (all cores) or positive")
    if args.seed < 0:
        raise PeerError("--seed must be 0 or positive")
    if sum([args.prefix_only, args.head_only, args.infer_only]) > 1:
        raise PeerError("--prefix-only, --head-only and --infer-only exclude each other")
    classes = parse_classes(args.classes)
    if args.profile and not os.path.isdir(args.profile):
        raise PeerError("--profile: %s is not a directory" % args.profile)

    def profile_path(part):
        return os.path.join(args.profile, "peer-%s.json" % part) if args.profile else None

    try:
        import numpy  # noqa: F401
        import torch
    except ImportError as e:
        raise PeerError("%s needs numpy and torch (Debian: apt-get install python3-torch): %s"
                        % (sys.executable, e))

    threads = args.threads if args.threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(threads)

    images, labels_np = load_train_split(args.data_dir, classes, args.limit)
    n = int(images.shape[0])
    # Preprocess once, outside any timing (the data is small): [n, 1, 28, 28] float32.
    x_all = torch.from_numpy(images.copy()).unsqueeze(1).float().div_(255.0).sub_(PIXEL_MEAN).div_(PIXEL_STD)
    y_all = torch.from_numpy(labels_np.copy()).long()

    # ---- full-model inference ----
    if args.infer_only:
        torch.manual_seed(args.seed)
        blocks, classifier = build_model(torch, WIDTH, len(classes))
        model = torch.nn.Sequential(*[b for _, b in blocks], classifier)
        model.eval()
        start = time.perf_counter()
        correct = 0
        with torch.no_grad():
            for b in range(0, n, PREFIX_BATCH):
                probs = torch.softmax(model(x_all[b:b + PREFIX_BATCH]), 1)
                correct += int((probs.argmax(1) == y_all[b:b + PREFIX_BATCH]).sum())
        infer_seconds = time.perf_counter() - start
        print(json.dumps({"peer": "eager-pytorch", "samples": n, "threads": threads,
                          "batch": PREFIX_BATCH, "classes": args.classes,
                          "torch_version": torch.__version__,
                          "infer_seconds": round(infer_seconds, 4),
                          "infer_samples_per_s": round(n / infer_seconds, 1)}))
        return 0

    # ---- full fine-tuning ----
    torch.manual_seed(args.seed)
    blocks, classifier = build_model(torch, WIDTH, len(classes))
    full = torch.nn.Sequential(*[b for _, b in blocks], classifier)
    if not args.prefix_only and not args.head_only:
        full_seconds, (full_loss, full_acc) = train(torch, full, x_all, y_all, args.epochs, args.batch,
                                                     args.seed, profile_to=profile_path("full"),
                                                     bf16=args.precision == "bf16")

    # ---- frozen prefix once, head from the in-memory activations ----
    torch.manual_seed(args.seed)
    blocks, classifier = build_model(torch, WIDTH, len(classes))
    split = int(round(RATIO * len(blocks)))
    prefix = torch.nn.Sequential(*[b for _, b in blocks[:split]])
    head = torch.nn.Sequential(*[b for _, b in blocks[split:]], classifier)
    prefix.eval()
    for p in prefix.parameters():
        p.requires_grad_(False)

    start = time.perf_counter()
    outputs = []
    with torch.no_grad():
        for b in range(0, n, PREFIX_BATCH):
            outputs.append(prefix(x_all[b:b + PREFIX_BATCH]))
    acts = torch.cat(outputs)
    prefix_seconds = time.perf_counter() - start
    del outputs

    if args.prefix_only:
        print(json.dumps({"peer": "eager-pytorch", "samples": n, "threads": threads,
                          "classes": args.classes, "torch_version": torch.__version__,
                          "ratio": RATIO, "split_at": blocks[split - 1][0],
                          "activation_shape": list(acts.shape[1:]),
                          "prefix_seconds": round(prefix_seconds, 4),
                          "prefix_samples_per_s": round(n / prefix_seconds, 1)}))
        return 0
    head_seconds, (head_loss, head_acc) = train(torch, head, acts, y_all, args.epochs, args.batch, args.seed,
                                                 profile_to=profile_path("head"),
                                                 bf16=args.precision == "bf16")

    head_median = statistics.median(head_seconds)
    result = {
        "peer": "eager-pytorch",
        "samples": n,
        "batch": args.batch,
        "threads": threads,
        "epochs": args.epochs,
        "seed": args.seed,
        "precision": args.precision,
        "classes": args.classes,
        "torch_version": torch.__version__,
        "ratio": RATIO,
        "split_at": blocks[split - 1][0],
        "activation_shape": list(acts.shape[1:]),
        "activation_bytes": acts.numel() * acts.element_size(),
        "prefix_seconds": round(prefix_seconds, 4),
        "prefix_samples_per_s": round(n / prefix_seconds, 1),
        "head_epoch_seconds": [round(s, 4) for s in head_seconds],
        "head_samples_per_s": round(n / head_median, 1),
        "head_final_loss": round(head_loss, 4),
        "head_final_train_acc": round(head_acc, 4),
    }
    if not args.head_only:
        full_median = statistics.median(full_seconds)
        result.update({
            "full_epoch_seconds": [round(s, 4) for s in full_seconds],
            "full_samples_per_s": round(n / full_median, 1),
            "full_final_loss": round(full_loss, 4),
            "full_final_train_acc": round(full_acc, 4),
            "speedup_head_vs_full": round(full_median / head_median, 3),
        })
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PeerError as e:
        print("eager_peer: error: " + str(e), file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("eager_peer: interrupted", file=sys.stderr)
        sys.exit(1)
    except (RuntimeError, MemoryError, OSError) as e:
        line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print("eager_peer: error: " + line, file=sys.stderr)
        sys.exit(1)
