#!/usr/bin/env python3
"""The device benchmark: where the cache stands on a device (GPU or CPU), with the engine's tools.

    python3 bench/gpu_bench.py --tools DIR [--device cuda] [--quick] [--builds-only] [--out DIR]

Two prefixes, each at half of its blocks (r = 0.5), random weights:
  image  torchvision's ResNet-50 (examples/export_torchvision.py: a scripted nn.Sequential,
         3x224x224 inputs, 10 classes), the prefix its stem, layer1 and layer2; uint8 images
         from numpy's generator (npy:DIR);
  text   the engine's transformer at BERT-base size (d_model 768, 12 layers, 12 heads, ff 3072,
         128 tokens; the prefix 6 layers), synthetic mails of 2 classes (tsv:FILE).
For each, side by side on the device:
  build      recycle-build --device D: samples a second (computed over seconds), the prefix's own
             rate inside the build (computed over prefix_seconds: inputs up, forward, outputs
             down, synchronised), their ratio, the record bytes written a second, and the disk's
             write rate (a file of the same bytes written and fsynced, measured just before);
  train      recycle-train epochs (median after the first): the head from the cache, full
             fine-tuning (--recycle 0 from the data) and the frozen prefix run online
             (--recycle 0.5 --no-cache); the head's speedups over each; on a GPU, its busy share
             during the cached run (nvidia-smi's utilization.gpu, sampled every 100 ms).
--builds-only stops after the builds (their JSON reports keep stage_seconds: where each build's
time went).
Prints one markdown table (and writes it, with every report, to --out). --quick: sizes for a
CPU check of the script (a few minutes on 2 cores), not for figures.
"""
import argparse
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def run(cmd, **kw):
    """Runs a tool; its --json report (the last stdout line), or exits naming the command."""
    start = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"gpu_bench: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stderr.strip()[-3000:]}")
    report = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}
    report["wall_s"] = time.perf_counter() - start
    return report


def disk_write_rate(folder, nbytes):
    """Bytes a second of one file of nbytes written in 8 MiB pieces and fsynced, in folder."""
    path = os.path.join(folder, "disk-probe")
    piece = os.urandom(8 << 20)
    start = time.perf_counter()
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            f.write(piece[:min(left, len(piece))])
            left -= len(piece)
        f.flush()
        os.fsync(f.fileno())
    seconds = time.perf_counter() - start
    os.remove(path)
    return nbytes / seconds


class GpuBusy:
    """nvidia-smi's utilization.gpu sampled every 100 ms while it lives (None without one)."""

    def __init__(self, device):
        self.samples, self.proc = [], None
        if device.startswith("cuda") and shutil.which("nvidia-smi"):
            index = device.split(":")[1] if ":" in device else "0"
            self.proc = subprocess.Popen(["nvidia-smi", "-i", index, "--query-gpu=utilization.gpu",
                                          "--format=csv,noheader,nounits", "-lms", "100"],
                                         stdout=subprocess.PIPE, text=True)
            self.thread = threading.Thread(target=self._read, daemon=True)
            self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.strip().isdigit():
                self.samples.append(int(line))

    def stop(self):
        if not self.proc:
            return None
        self.proc.terminate()
        self.proc.wait()
        return statistics.mean(self.samples) if self.samples else None


def later(epochs):
    return statistics.median(epochs[1:] if len(epochs) > 1 else epochs)


def image_task(a, work):
    """npy:DIR of uint8 3x224x224 images and the scripted ResNet-50; (data spec, model spec)."""
    import numpy as np
    size = a.image_size
    data = os.path.join(work, "images")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", a.images), ("test", max(a.images // 4, 16))):
        np.save(os.path.join(data, f"{split}_x.npy"), rng.integers(0, 256, (n, 3, size, size), dtype=np.uint8))
        np.save(os.path.join(data, f"{split}_y.npy"), rng.integers(0, 10, n, dtype=np.int64))
    model = os.path.join(work, "resnet50.ts")
    subprocess.run([sys.executable, os.path.join(SOURCE, "examples", "export_torchvision.py"), model,
                    "--arch", "resnet50", "--in-channels", "3", "--num-classes", "10"], check=True,
                   stdout=subprocess.DEVNULL)
    return f"npy:{data}", f"torchscript:{model}"


WORDS = ("meeting report build patch review lunch numbers notes schedule server invoice offer free "
         "prize cash bonus click winner cheap pills mortgage rates money fast selected claim").split()


def text_task(a, work):
    """tsv:DIR of synthetic mails (ham/spam by their words) and the BERT-base-size transformer."""
    data = os.path.join(work, "mails")
    os.makedirs(data, exist_ok=True)
    rnd = random.Random(0)
    for split, n in (("train", a.texts), ("test", max(a.texts // 4, 16))):
        with open(os.path.join(data, f"{split}.tsv"), "w") as f:
            for i in range(n):
                spam = i % 2
                pool = WORDS[12:] if spam else WORDS[:12]
                words = [rnd.choice(pool if rnd.random() < 0.7 else WORDS) for _ in range(40)]
                f.write(f"{'spam' if spam else 'ham'}\t{' '.join(words)} #{rnd.randrange(10 ** 9)}\n")
    return f"tsv:{data}", a.transformer


def bench_task(a, name, data, model, work):
    tools, dev = a.tools, a.device
    cache = os.path.join(work, f"cache-{name}")
    common = ["--data", data, "--model", model, "--device", dev, "--json"]
    builds = {}
    for split in ("train", "test"):
        builds[split] = run([f"{tools}/recycle-build", *common, "--split", split, "--cache", cache,
                             "--recycle", "0.5", "--batch", a.build_batch])
    b = builds["train"]
    disk = disk_write_rate(work, max(int(b["bytes"]), 64 << 20))
    if a.builds_only:
        return build_row(name, b, disk, builds)
    train = ["--epochs", a.epochs, "--batch", a.batch, "--device", dev, "--json", "--eval-split", "none"]
    busy = GpuBusy(dev)
    # A cache made from a program names it; the tools open the program only when given it.
    program = ["--model", model] if model.startswith("torchscript:") else []
    cached = run([f"{tools}/recycle-train", "--cache", cache, *program, *train])
    busy_share = busy.stop()
    full = run([f"{tools}/recycle-train", "--data", data, "--model", model, "--recycle", "0", *train])
    online = run([f"{tools}/recycle-train", "--data", data, "--model", model, "--recycle", "0.5",
                  "--no-cache", *train])
    row = build_row(name, b, disk, builds)
    row.update({
        "epoch_cached_s": later(cached["epoch_seconds"]),
        "epoch_full_s": later(full["epoch_seconds"]),
        "epoch_online_s": later(online["epoch_seconds"]),
        "gpu_busy_pct": busy_share,
        "reports": {"build": builds, "cached": cached, "full": full, "online": online},
    })
    row["vs_full"] = row["epoch_full_s"] / row["epoch_cached_s"]
    row["vs_online"] = row["epoch_online_s"] / row["epoch_cached_s"]
    return row


def build_row(name, b, disk, builds):
    """The build's columns of a task's row (the training columns None: --builds-only)."""
    row = {
        "task": name, "samples": b["computed"],
        "build_per_s": b["computed"] / b["seconds"],
        "prefix_per_s": b["computed"] / b["prefix_seconds"] if b.get("prefix_seconds") else None,
        "build_mb_per_s": b["bytes"] / b["seconds"] / 1e6,
        "disk_mb_per_s": disk / 1e6,
        "record_bytes": b["bytes"] / max(b["records"], 1),
        "epoch_cached_s": None, "epoch_full_s": None, "epoch_online_s": None,
        "vs_full": None, "vs_online": None, "gpu_busy_pct": None,
        "reports": {"build": builds},
        # Where the training split's build spent its seconds (recycle-build --json).
        "stage_seconds": b.get("stage_seconds"),
    }
    row["build_vs_prefix"] = row["build_per_s"] / row["prefix_per_s"] if row["prefix_per_s"] else None
    row["build_vs_disk"] = row["build_mb_per_s"] / row["disk_mb_per_s"]
    return row


def device_name(device):
    if device.startswith("cuda"):
        try:
            import torch
            return torch.cuda.get_device_name(int(device.split(":")[1]) if ":" in device else 0)
        except Exception as e:  # noqa: BLE001 -- named in the table instead
            return f"cuda ({e})"
    with open("/proc/cpuinfo") as f:
        return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "cpu")


def table(rows, device, a):
    f = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    x = lambda v: "-" if v is None else f"{v:.2f}x"  # noqa: E731
    lines = [f"{device_name(device)} ({device}); {a.epochs} epochs, batch {a.batch}, fp16 records, r = 0.5", "",
             "| task | samples | build /s | prefix in build /s | build vs prefix | build MB/s | disk MB/s | build vs disk "
             "| record KB | head epoch s (cache) | full s | online s | vs full | vs online | GPU busy % |",
             "| --- " * 15 + "|"]
    for r in rows:
        lines.append(f"| {r['task']} | {r['samples']} | {f(r['build_per_s'], 0)} | {f(r['prefix_per_s'], 0)} | "
                     f"{x(r['build_vs_prefix'])} | {f(r['build_mb_per_s'], 0)} | {f(r['disk_mb_per_s'], 0)} | "
                     f"{x(r['build_vs_disk'])} | {f(r['record_bytes'] / 1e3, 1)} | {f(r['epoch_cached_s'], 3)} | "
                     f"{f(r['epoch_full_s'], 3)} | {f(r['epoch_online_s'], 3)} | {x(r['vs_full'])} | "
                     f"{x(r['vs_online'])} | {f(r['gpu_busy_pct'], 0)} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tools", required=True, help="folder of recycle-build and recycle-train")
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true", help="small sizes: a CPU check of the script")
    p.add_argument("--tasks", nargs="+", default=["image", "text"], choices=["image", "text"])
    p.add_argument("--out", help="write gpu_bench.md and gpu_bench.json here")
    p.add_argument("--work", help="scratch folder (default: a temporary one, removed after)")
    p.add_argument("--images", type=int, help="training images (default 2048; --quick 32)")
    p.add_argument("--texts", type=int, help="training mails (default 4096; --quick 64)")
    p.add_argument("--epochs", type=int, help="epochs of each training run (default 3; --quick 2)")
    p.add_argument("--builds-only", action="store_true", help="the builds' columns alone, no training")
    a = p.parse_args()
    images, texts, a.image_size = (32, 64, 64) if a.quick else (2048, 4096, 224)
    epochs, a.batch, a.build_batch = (2, 16, 32) if a.quick else (3, 128, 256)
    # The models keep their full size with fewer samples: a CPU's rows in minutes, not hours.
    a.images, a.texts, a.epochs = a.images or images, a.texts or texts, a.epochs or epochs
    a.transformer = ("transformer:d_model=64,layers=4,heads=4,ff=128,max_tokens=64" if a.quick else
                     "transformer:d_model=768,layers=12,heads=12,ff=3072,max_tokens=128")
    work = a.work or tempfile.mkdtemp(prefix="gpu-bench-")
    os.makedirs(work, exist_ok=True)
    rows = []
    try:
        for name in a.tasks:
            if name == "image" and importlib.util.find_spec("torchvision") is None:
                print("gpu_bench: image: skipped (this python has no torchvision)", file=sys.stderr)
                continue
            data, model = (image_task if name == "image" else text_task)(a, work)
            print(f"gpu_bench: {name}: {model.split(',')[0]} on {data}", file=sys.stderr, flush=True)
            rows.append(bench_task(a, name, data, model, work))
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    text = table(rows, a.device, a)
    print(text, end="")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "gpu_bench.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "gpu_bench.json"), "w") as f:
            json.dump({"device": device_name(a.device), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
