#!/usr/bin/env python3
"""Composer's progressive freezing: the peer of recycle-bench --progressive --composer-python.

What a user would run instead of `recycle-train --freeze linear:START:LEVEL`: MosaicML
Composer 0.32.1's Trainer with its LayerFreezing(freeze_start=START, freeze_level=LEVEL)
algorithm, fine-tuning the engine's width-16 ResNet-18 (eager_peer.py's replica of
engine/models/block_model.cc) from the engine's own weights file (--weights, the safetensors
file `recycle-train --save-model` writes; its classifier is replaced when it was trained on
other classes, as recycle-train replaces it) on Fashion-MNIST, then its accuracy on the test
split of the same classes (all of it, as recycle-train evaluates).

The training is the engine's (engine/train/trainer.cc): SGD (lr 0.05, Nesterov momentum 0.9,
weight decay 5e-4), a cosine learning rate set per step (Composer's CosineAnnealingScheduler
over the whole run), batches of --batch reshuffled each epoch, the last partial one kept.
LayerFreezing runs at each epoch's end: with t the fraction of training done, it freezes the
first floor(LEVEL x (t - START) / (1 - START) x L) of the model's L-1 first leaf modules
with parameters (convolutions, batch norms; the classifier never), takes their parameters
out of the optimizer and stops their gradients (the forward still runs through them, and
their batch norms keep training-mode statistics).

Composer pins torch 2.6-2.7: run this in its own environment (bench/peers/composer_venv.sh
makes one and prints its python). Timing: `seconds` is the wall time from loading the data
to the end of the evaluation (Composer's import, several seconds, is not counted);
`fit_seconds` is Trainer.fit alone. The last line of stdout is one JSON object. Errors: one
line on stderr, exit status 1 (argparse usage errors: 2).
"""

import argparse
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eager_peer  # noqa: E402  (the data and the model replica)
from eager_peer import PIXEL_MEAN, PIXEL_STD, PREFIX_BATCH, WIDTH, PeerError  # noqa: E402

COMPOSER_VERSION = "0.32.1"
SAFETENSORS_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_engine_weights(path):
    """The tensors and metadata of a safetensors file recycle wrote (numpy arrays by name)."""
    import numpy as np
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise PeerError("cannot read --weights %s: %s" % (path, e))
    if len(raw) < 8:
        raise PeerError("--weights %s: not a safetensors file (too short)" % path)
    header_len = struct.unpack("<Q", raw[:8])[0]
    try:
        header = json.loads(raw[8:8 + header_len])
    except ValueError:
        raise PeerError("--weights %s: not a safetensors file (no JSON header)" % path)
    data = raw[8 + header_len:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry.get("dtype") not in SAFETENSORS_DTYPES:
            raise PeerError("--weights %s: tensor %s of dtype %s" % (path, name, entry.get("dtype")))
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=SAFETENSORS_DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"]).copy()
    return tensors, header.get("__metadata__", {})


def build_net(torch, classes, weights, class_names):
    """The replica with the blocks' names the engine's file uses (layer1_0 .. layer4_1, fc),
    loaded from `weights` (when given); the classifier kept only when it was trained on the
    same class names (else new, seeded, as recycle-train makes it)."""
    blocks, classifier = eager_peer.build_model(torch, WIDTH, len(classes))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.names = [name.replace(".", "_") for name, _ in blocks]
            for name, (_, block) in zip(self.names, blocks):
                setattr(self, name, block)
            self.fc = classifier

        def forward(self, x):
            for name in self.names:
                x = getattr(self, name)(x)
            return self.fc(x)

    net = Net()
    if not weights:
        return net, False
    tensors, metadata = read_engine_weights(weights)
    stored_names = json.loads(metadata.get("recycle.class_names", "[]"))
    keep_classifier = stored_names == class_names
    state = {k: torch.from_numpy(v) for k, v in tensors.items()
             if keep_classifier or not k.startswith("fc.")}
    missing, unexpected = net.load_state_dict(state, strict=False)
    missing = [k for k in missing if keep_classifier or not k.startswith("fc.")]
    if missing or unexpected:
        raise PeerError("--weights %s is not the engine's width-%d ResNet-18 (missing %s, "
                        "unexpected %s)" % (weights, WIDTH, missing[:3], unexpected[:3]))
    return net, keep_classifier


def normalised(torch, images):
    return torch.from_numpy(images.copy()).unsqueeze(1).float().div_(255.0).sub_(
        PIXEL_MEAN).div_(PIXEL_STD)


def accuracy(torch, net, x, y):
    net.eval()
    correct = 0
    with torch.no_grad():
        for b in range(0, x.shape[0], PREFIX_BATCH):
            correct += int(net(x[b:b + PREFIX_BATCH]).argmax(1).eq(y[b:b + PREFIX_BATCH]).sum())
    return correct / max(1, x.shape[0])


def frozen_leaves(net):
    leaves = [m for m in net.modules()
              if not list(m.children()) and list(m.parameters())]
    return sum(1 for m in leaves if not any(p.requires_grad for p in m.parameters())), len(leaves)


def main():
    parser = argparse.ArgumentParser(
        description="Composer " + COMPOSER_VERSION + "'s LayerFreezing on the engine's transfer "
                    "task: the peer of recycle-bench --progressive --composer-python.")
    parser.add_argument("--weights", default="",
                        help="the engine's pretrained encoder (recycle-train --save-model); "
                             "default: random weights")
    parser.add_argument("--classes", default="5-9", help="classes to fine-tune on (default: 5-9)")
    parser.add_argument("--limit", type=int, default=5000,
                        help="training samples, the first of those classes (0 = all; default 5000)")
    parser.add_argument("--epochs", type=int, default=8, help="epochs (default: 8)")
    parser.add_argument("--batch", type=int, default=128, help="samples a step (default: 128)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (0 = every core)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    parser.add_argument("--freeze-start", type=float, default=0.25,
                        help="LayerFreezing's freeze_start (default: 0.25)")
    parser.add_argument("--freeze-level", type=float, default=0.75,
                        help="LayerFreezing's freeze_level (default: 0.75)")
    parser.add_argument("--data-dir", default=eager_peer.DEFAULT_DATA_DIR,
                        help="Fashion-MNIST's IDX .gz files (default: Debian's)")
    args = parser.parse_args()
    if args.limit < 0 or args.epochs < 1 or args.batch < 1 or args.threads < 0 or args.seed < 0:
        raise PeerError("--limit, --threads, --seed must be >= 0, --epochs and --batch >= 1")
    if not (0 <= args.freeze_start < 1 and 0 < args.freeze_level <= 1):
        raise PeerError("--freeze-start must be in [0, 1) and --freeze-level in (0, 1]")
    classes = eager_peer.parse_classes(args.classes)
    try:
        import torch
        import composer
        from composer import Trainer
        from composer.algorithms import LayerFreezing
        from composer.models import ComposerClassifier
        from composer.optim import CosineAnnealingScheduler
    except ImportError as e:
        raise PeerError("%s has no Composer (%s): run bench/peers/composer_venv.sh and use "
                        "the python it prints" % (sys.executable, e))
    threads = args.threads or (os.cpu_count() or 1)
    torch.set_num_threads(threads)

    start = time.perf_counter()
    images, labels = eager_peer.load_train_split(args.data_dir, classes, args.limit)
    test_images, test_labels = eager_peer.load_train_split(args.data_dir, classes, 0, "t10k")
    x, y = normalised(torch, images), torch.from_numpy(labels.copy()).long()
    test_x, test_y = normalised(torch, test_images), torch.from_numpy(test_labels.copy()).long()
    names = [eager_peer.FASHION_MNIST_NAMES[c] for c in classes]
    torch.manual_seed(args.seed)
    net, kept = build_net(torch, classes, args.weights, names)

    generator = torch.Generator()
    generator.manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=args.batch, shuffle=True, generator=generator)
    model = ComposerClassifier(module=net, num_classes=len(classes),
                               loss_fn=torch.nn.functional.cross_entropy)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)
    trainer = Trainer(model=model, train_dataloader=loader, max_duration="%dep" % args.epochs,
                      optimizers=optimizer, schedulers=CosineAnnealingScheduler(t_max="1dur"),
                      step_schedulers_every_batch=True, device="cpu", precision="fp32",
                      algorithms=[LayerFreezing(freeze_start=args.freeze_start,
                                                freeze_level=args.freeze_level)],
                      loggers=[], progress_bar=False, log_to_console=False, seed=args.seed)
    fit_start = time.perf_counter()
    trainer.fit()
    fit_seconds = time.perf_counter() - fit_start
    test_acc = accuracy(torch, net, test_x, test_y)
    seconds = time.perf_counter() - start
    frozen, leaves = frozen_leaves(net)
    print(json.dumps({
        "peer": "composer", "composer_version": composer.__version__,
        "torch_version": torch.__version__, "algorithm": "LayerFreezing",
        "freeze_start": args.freeze_start, "freeze_level": args.freeze_level,
        "samples": int(x.shape[0]), "test_samples": int(test_x.shape[0]),
        "epochs": args.epochs, "batch": args.batch, "threads": threads, "seed": args.seed,
        "classes": args.classes, "weights": args.weights, "classifier_kept": kept,
        "frozen_leaves": frozen, "leaves": leaves,
        "seconds": round(seconds, 3), "fit_seconds": round(fit_seconds, 3),
        "test_acc": round(test_acc, 4)}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PeerError as e:
        print("composer_peer: error: " + str(e), file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("composer_peer: interrupted", file=sys.stderr)
        sys.exit(1)
