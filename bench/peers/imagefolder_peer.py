#!/usr/bin/python3
"""The torchvision peer of recycle-bench --decode: what a user reads an image folder with today.

Three modes, one per run:

  --export DIR   writes Fashion-MNIST's training split (--classes, the first --limit samples) as
                 an ImageFolder tree DIR/train/<class id>/<position>.<ext>: --format png keeps
                 the 28x28 gray images as they are (PNG, lossless); --format jpeg writes RGB JPEGs
                 of --size x --size pixels (PIL bilinear upscale, quality 90, 4:2:0), the common
                 shape of photo data sets.
  --decode DIR   reads DIR (an ImageFolder root) with torchvision.datasets.ImageFolder and
                 transforms (--channels 1: Grayscale(1), else RGB; ToTensor; Normalize) through
                 DataLoader(batch 256, num_workers=--workers) and times one pass: decode and
                 transform, what the engine's image folder reader does before the prefix.
  --prefix DIR   the same loader feeding the engine's prefix (eager_peer.py's width-16
                 ResNet-18, first 4 of 8 blocks, eval mode, torch.no_grad()), outputs kept in
                 memory: the peer's equivalent of recycle-build over the folder.

Run with Debian's interpreter: /usr/bin/python3 bench/peers/imagefolder_peer.py [options]
The last line of stdout is one JSON object. Errors: one line on stderr, exit status 1.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eager_peer  # noqa: E402  (read_idx, parse_classes, load_train_split, build_model)

BATCH = 256


def export(args):
    from PIL import Image
    classes = eager_peer.parse_classes(args.classes)
    images, labels = eager_peer.load_train_split(args.data_dir, classes, args.limit)
    root = os.path.join(args.export, "train")
    for c in range(len(classes)):
        os.makedirs(os.path.join(root, "%d" % c), exist_ok=True)
    ext = "png" if args.format == "png" else "jpg"
    start = time.perf_counter()
    for i in range(images.shape[0]):
        path = os.path.join(root, "%d" % int(labels[i]), "%05d.%s" % (i, ext))
        img = Image.fromarray(images[i], mode="L")
        if args.format == "png":
            img.save(path, format="PNG")
        else:
            if args.size != 28:
                img = img.resize((args.size, args.size), Image.BILINEAR)
            img.convert("RGB").save(path, format="JPEG", quality=90)
    return {"exported": int(images.shape[0]), "format": args.format, "size": args.size,
            "root": root, "seconds": round(time.perf_counter() - start, 3)}


def loader(torch, args, root):
    import torchvision
    from torchvision import transforms as T
    ops = [T.Grayscale(1)] if args.channels == 1 else [T.Lambda(lambda im: im.convert("RGB"))]
    ops += [T.ToTensor(), T.Normalize([args.mean] * args.channels, [args.std] * args.channels)]
    ds = torchvision.datasets.ImageFolder(root, transform=T.Compose(ops))
    return ds, torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=False,
                                           num_workers=args.workers)


def decode(torch, args):
    ds, dl = loader(torch, args, args.decode)
    start = time.perf_counter()
    n = 0
    checksum = 0.0
    for x, _ in dl:
        n += int(x.shape[0])
        checksum += float(x[:, :, 0, 0].sum())  # touch the batch
    seconds = time.perf_counter() - start
    return {"peer": "torchvision-imagefolder", "samples": n, "workers": args.workers,
            "shape": list(ds[0][0].shape), "seconds": round(seconds, 4),
            "images_per_s": round(n / seconds, 1), "torch_version": torch.__version__}


def prefix(torch, args):
    ds, dl = loader(torch, args, args.prefix)
    torch.manual_seed(0)
    blocks, _ = eager_peer.build_model(torch, eager_peer.WIDTH, len(ds.classes))
    split = int(round(eager_peer.RATIO * len(blocks)))
    net = torch.nn.Sequential(*[b for _, b in blocks[:split]])
    net.eval()
    start = time.perf_counter()
    outputs = []
    with torch.no_grad():
        for x, _ in dl:
            outputs.append(net(x))
    seconds = time.perf_counter() - start
    n = sum(int(o.shape[0]) for o in outputs)
    return {"peer": "torchvision-imagefolder", "samples": n, "workers": args.workers,
            "threads": torch.get_num_threads(), "split_at": blocks[split - 1][0],
            "prefix_seconds": round(seconds, 4), "samples_per_s": round(n / seconds, 1),
            "torch_version": torch.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--export", metavar="DIR", help="write an ImageFolder tree under DIR/train")
    mode.add_argument("--decode", metavar="DIR", help="time decode + transform of DIR's images")
    mode.add_argument("--prefix", metavar="DIR", help="time the prefix pass over DIR's images")
    p.add_argument("--format", choices=["png", "jpeg"], default="png", help="--export: file format")
    p.add_argument("--size", type=int, default=28, help="--export jpeg: side in pixels (default 28)")
    p.add_argument("--classes", default="5-9", help="--export: Fashion-MNIST classes (default 5-9)")
    p.add_argument("--limit", type=int, default=5000, help="--export: first N samples (0 = all)")
    p.add_argument("--data-dir", default=eager_peer.DEFAULT_DATA_DIR, help="Fashion-MNIST's IDX files")
    p.add_argument("--channels", type=int, choices=[1, 3], default=1, help="1 (gray) or 3 (RGB)")
    p.add_argument("--mean", type=float, default=eager_peer.PIXEL_MEAN, help="Normalize mean")
    p.add_argument("--std", type=float, default=eager_peer.PIXEL_STD, help="Normalize std")
    p.add_argument("--workers", type=int, default=2, help="DataLoader num_workers (default 2)")
    p.add_argument("--threads", type=int, default=2, help="torch threads of the main process")
    args = p.parse_args()
    if args.size < 1 or args.limit < 0 or args.workers < 0 or args.threads < 1:
        raise eager_peer.PeerError("--size and --threads must be positive, --limit and --workers >= 0")
    if args.export:
        result = export(args)
    else:
        try:
            import torch
        except ImportError as e:
            raise eager_peer.PeerError("%s needs torch and torchvision (Debian: apt-get install "
                                       "python3-torch python3-torchvision): %s" % (sys.executable, e))
        torch.set_num_threads(args.threads)
        result = decode(torch, args) if args.decode else prefix(torch, args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (eager_peer.PeerError, OSError, ImportError) as e:
        print("imagefolder_peer.py: error: %s" % e, file=sys.stderr)
        sys.exit(1)
