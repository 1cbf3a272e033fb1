"""What each rank of a sharded build reads of an image folder, counted by strace: the files each
rank's process (all its threads) opens under the folder, as a share of the folder's files.

recycle-build --sharded: each rank runs as its own process (--rank R --world-size W --master
127.0.0.1:PORT) under its own `strace -f`. recycle.build(..., sharded=True): W Python processes
joined by torch.distributed (env://, Gloo), each under its own strace, over a map-style Dataset
that opens each sample's file; and again over a DataLoader of that dataset (read whole twice).

Usage: python3 bench/sharded_reads.py --tools build [--ranks 4] [--images 2000] [--out DIR]
Writes DIR/sharded-reads.json and prints a table (Markdown)."""
import argparse
import gzip
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import zlib

FASHION = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
LABELS = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"


def png(width, height, pixels):
    """A gray 8-bit PNG of `pixels` (bytes, row by row)."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    rows = b"".join(b"\0" + pixels[y * width:(y + 1) * width] for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0,
                                                              0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def write_folder(root, n):
    """The first n Fashion-MNIST training images as root/c<label>/<i>.png; their paths."""
    with gzip.open(FASHION) as f:
        images = f.read()[16:16 + n * 784]
    with gzip.open(LABELS) as f:
        labels = f.read()[8:8 + n]
    paths = []
    for i in range(n):
        d = os.path.join(root, f"c{labels[i]}")
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, f"{i:05d}.png")
        with open(p, "wb") as f:
            f.write(png(28, 28, images[i * 784:(i + 1) * 784]))
        paths.append(p)
    return paths


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OPEN = re.compile(r'open(?:at)?\((?:AT_FDCWD, )?"([^"]+)".*\) = \d+')


def opened(trace, folder):
    """Every successful open of a file under `folder` in an strace log (all threads)."""
    out = []
    with open(trace, errors="replace") as f:
        for line in f:
            m = OPEN.search(line)
            if m and m.group(1).startswith(folder + "/") and m.group(1).endswith(".png"):
                out.append(m.group(1))
    return out


def run_ranks(commands, traces, envs):
    """Each rank's command under its own strace -f (all its threads), all at once, with its
    environment; their outputs."""
    procs = [subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", t] + c,
                              env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c, t, e in zip(commands, traces, envs)]
    outs = [p.communicate(timeout=1800) for p in procs]
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"a rank failed ({p.returncode}):\n{err[-3000:]}")
    return [o for o, _ in outs]


def shares(traces, folder, n):
    """Per rank: (distinct files opened / n, opens / n)."""
    rows = []
    for t in traces:
        files = opened(t, folder)
        rows.append((len(set(files)) / n, len(files) / n))
    return rows


PY_RANK = textwrap.dedent("""
    import json, os, sys, torch, torch.distributed as dist, recycle
    dist.init_process_group("gloo")
    paths = json.load(open(sys.argv[2]))
    class Files(torch.utils.data.Dataset):  # each sample read from its file
        def __len__(self):
            return len(paths)
        def __getitem__(self, i):
            with open(paths[i], "rb") as f:
                data = f.read()
            return torch.frombuffer(bytearray(data[:64]), dtype=torch.uint8).float(), 0
    data = Files()
    if sys.argv[3] == "loader":
        data = torch.utils.data.DataLoader(data, batch_size=64)
    recycle.build(sys.argv[1], data, lambda x: x * 2, model_id="reads", codec="fp32",
                           batch_size=64, sharded=True, progress=False)
    dist.destroy_process_group()
""")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", required=True, help="the build directory with recycle-build")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--out", default=None, help="where sharded-reads.json goes (default: none)")
    a = ap.parse_args()
    if shutil.which("strace") is None:
        sys.exit("strace is needed (apt-get install strace)")
    work = tempfile.mkdtemp(prefix="sharded-reads-")
    folder = os.path.join(work, "images")
    paths = write_folder(folder, a.images)
    w, n = a.ranks, a.images
    env = dict(os.environ, RECYCLE_JOB_TOKEN="sharded-reads", OMP_NUM_THREADS="1")
    results = {}

    port = free_port()
    tool = os.path.join(os.path.abspath(a.tools), "recycle-build")
    commands = [[tool, "--data", f"imagefolder:{folder}", "--width", "4", "--recycle", "0.25",
                 "--sharded", "--cache", os.path.join(work, f"tool-{r}"), "--threads", "1",
                 "--rank", str(r), "--world-size", str(w), "--master", f"127.0.0.1:{port}",
                 "--json"] for r in range(w)]
    traces = [os.path.join(work, f"tool-{r}.strace") for r in range(w)]
    report = json.loads(run_ranks(commands, traces, [env] * w)[0].strip().splitlines()[-1])
    sizes = [s["samples"] for s in report["per_shard"]]
    results["recycle-build --sharded"] = shares(traces, folder, n)

    with open(os.path.join(work, "paths.json"), "w") as f:
        json.dump(paths, f)
    script = os.path.join(work, "rank.py")
    with open(script, "w") as f:
        f.write(PY_RANK)
    for kind in ("dataset", "loader"):
        port = free_port()
        traces = [os.path.join(work, f"py-{kind}-{r}.strace") for r in range(w)]
        commands = [[sys.executable, script, os.path.join(work, f"py-{kind}-{{rank}}"),
                     os.path.join(work, "paths.json"), kind] for _ in range(w)]
        run_ranks(commands, traces, [dict(env, RANK=str(r), WORLD_SIZE=str(w),
                                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
                                     for r in range(w)])
        name = ("recycle.build(sharded=True), a Dataset" if kind == "dataset" else
                "recycle.build(sharded=True), a DataLoader")
        results[name] = shares(traces, folder, n)

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    print(f"{n} PNG files, {w} ranks on one machine ({cpu}); the shards: {sizes} samples")
    print()
    print("| build | " + " | ".join(f"rank {r}: files (opens)" for r in range(w)) + " |")
    print("| --- |" + " --- |" * w)
    for name, rows in results.items():
        print(f"| {name} | " + " | ".join(f"{d:.3f} ({o:.3f})" for d, o in rows) + " |")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "sharded-reads.json"), "w") as f:
            json.dump({"images": n, "ranks": w, "cpu": cpu, "shards": sizes, "shares": results},
                      f, indent=1)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
