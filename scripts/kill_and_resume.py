#!/usr/bin/env python3
"""Kills a recycle-train job with SIGKILL at random steps, again and again, reruns it from its
--checkpoint each time, and compares where it ends with the same job never stopped.

    python3 scripts/kill_and_resume.py --tools build --cache CACHE [--kills 10]
        [--every 5] [-- MORE RECYCLE-TRAIN ARGUMENTS]

The job: `recycle-train --cache CACHE --json --save-head FILE` with the arguments after --
(default: --epochs 4 --batch 20 --seed 5 --threads 1). It runs once whole; then with
`--checkpoint FILE --checkpoint-every N`, killed (its whole process group: --nproc's workers too)
after a random time between --min-s and --max-s, --kills times at most, each rerun
resuming from the checkpoint, until a run ends. Prints where each rerun resumed and, at the end,
whether the epoch losses, the test accuracy and the saved head's bytes equal the whole run's
(bit for bit is what one process with --threads 1 gives; data-parallel ranks are within noise).
Exits 1 when one process's run differs.
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"kill_and_resume: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout.splitlines()[-1]), r.stderr


def position(path):
    """(epochs done, batches of the next) of the checkpoint at `path`: its metadata entry is JSON
    text inside the file; (0, 0) when there is none yet."""
    try:
        with open(path, "rb") as f:
            data = f.read().decode("latin-1")
    except FileNotFoundError:
        return 0, 0
    batches = re.search(r'batches_done\\?":(\d+)', data)
    epochs = re.search(r'epochs_done\\?":(\d+)', data)
    return int(epochs.group(1)) if epochs else 0, int(batches.group(1)) if batches else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tools", required=True, help="folder of recycle-train")
    p.add_argument("--cache", required=True)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--every", type=int, default=5, help="--checkpoint-every")
    p.add_argument("--min-s", type=float, default=0.3,
                   help="the earliest kill, seconds after start")
    p.add_argument("--max-s", type=float, default=0,
                   help="the latest kill, seconds after start (0: a quarter of the whole run's "
                        "time)")
    p.add_argument("--seed", type=int, default=0, help="of the kills' times")
    p.add_argument("job", nargs="*", help="recycle-train's arguments (after --)")
    a = p.parse_args()
    job = a.job or ["--epochs", "4", "--batch", "20", "--seed", "5", "--threads", "1"]
    tool = os.path.join(a.tools, "recycle-train")
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        base = [tool, "--cache", a.cache, "--json", *job]
        start = time.perf_counter()
        whole, _ = run(base + ["--save-head", f"{tmp}/whole.pt"])
        whole_s = time.perf_counter() - start
        ck = f"{tmp}/job.ckpt"
        resumable = base + ["--checkpoint", ck, "--checkpoint-every", str(a.every),
                            "--save-head", f"{tmp}/resumed.pt"]
        kills, last = 0, None
        while True:
            proc = subprocess.Popen(resumable, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
            if kills < a.kills:
                delay = rng.uniform(a.min_s, max(a.min_s, a.max_s or whole_s / 4))
                try:
                    proc.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    kills += 1
                    epochs, batches = position(ck)
                    print(f"kill {kills}: SIGKILL after {delay:.2f} s; the checkpoint stands in "
                          f"epoch {epochs + 1} after its batch {batches}", flush=True)
                    continue
            out, err = proc.communicate()
            if proc.returncode != 0:
                sys.exit(f"kill_and_resume: the rerun exited {proc.returncode}: {err.strip()}")
            last = json.loads(out.splitlines()[-1])
            break
        same_loss = last["epoch_loss"] == whole["epoch_loss"][last["resumed_epochs"]:]
        same_acc = last["test_acc"] == whole["test_acc"]
        with open(f"{tmp}/whole.pt", "rb") as f1, open(f"{tmp}/resumed.pt", "rb") as f2:
            same_head = f1.read() == f2.read()
    print(f"{kills} kills; the last run resumed in epoch {last['resumed_epochs'] + 1} after its "
          f"batch {last['resumed_batches']}; whole run {whole_s:.1f} s")
    print(f"epoch losses equal: {same_loss}; test acc {last['test_acc']} against "
          f"{whole['test_acc']}: {same_acc}; heads equal byte for byte: {same_head}")
    if not (same_loss and same_acc and same_head) and last.get("world_size", 1) == 1:
        sys.exit(1)


if __name__ == "__main__":
    main()
