#!/usr/bin/env python3
"""recycle-reshard's rate against the loopback's, side by side in one run.

Builds Fashion-MNIST's training split as shards of 2 (recycle-build --sharded --nproc 2), then,
in turns, RUNS times each: the loopback's rate (one process sends 1 GiB to another over a TCP
socket on 127.0.0.1, 4 MiB a send) and a reshard of the shards to 3 (recycle-reshard --nproc 3
--rebuild: ranks 0 and 1 send what shard 2 of 3 and their new shards need; every rank writes its
new shard). The reshard's rate is the bytes of records that crossed between ranks over the
slowest rank's move_seconds (the reads, the exchange and the writes and flushes of a whole new
copy of every shard; joining the job and the checks are in whole_seconds). Prints a JSON object
(medians, every run, the CPU) and writes it to --out.

    /usr/bin/python3 bench/reshard_rate.py --tools build [--limit 60000] [--runs 3] [--out F]
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def loopback_mb_s(total=1 << 30, chunk=4 << 20):
    """MB/s of `total` bytes from another process over a TCP socket on 127.0.0.1."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    code = ("import socket\ns = socket.create_connection(('127.0.0.1', %d))\nb = bytes(%d)\n"
            "n = %d\nwhile n > 0:\n    k = min(n, %d)\n    s.sendall(b[:k])\n    n -= k\n"
            "s.close()\n" % (port, chunk, total, chunk))
    sender = subprocess.Popen([sys.executable, "-c", code])
    conn, _ = srv.accept()
    buf = memoryview(bytearray(chunk))
    got = 0
    start = time.perf_counter()
    while True:
        k = conn.recv_into(buf)
        if k == 0:
            break
        got += k
    seconds = time.perf_counter() - start
    sender.wait()
    conn.close()
    srv.close()
    assert got == total, (got, total)
    return got / seconds / 1e6


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", default="build", help="the folder of the built tools")
    ap.add_argument("--limit", type=int, default=60000, help="training samples (60000: all)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="", help="also write the JSON object here")
    a = ap.parse_args()
    tool = lambda name: os.path.join(a.tools, name)  # noqa: E731
    env_note = "OMP_WAIT_POLICY=%s" % os.environ.get("OMP_WAIT_POLICY", "")
    with tempfile.TemporaryDirectory(prefix="reshard-rate-") as d:
        two, three = os.path.join(d, "two-{rank}"), os.path.join(d, "three-{rank}")
        build = run_json([tool("recycle-build"), "--data", "fashion-mnist", "--split", "train",
                          "--limit", str(a.limit), "--model", "resnet18", "--width", "16",
                          "--recycle", "0.5", "--nproc", "2", "--sharded", "--cache", two,
                          "--json"])
        loop, reshard = [], []
        for _ in range(a.runs):
            loop.append(loopback_mb_s())
            r = run_json([tool("recycle-reshard"), "--cache", two, "--to", three, "--shards",
                          "3", "--nproc", "3", "--rebuild", "--json"])
            moved = sum(p["bytes_sent"] for p in r["per_rank"])
            seconds = max(p["move_seconds"] for p in r["per_rank"])
            reshard.append({"bytes_moved": moved, "seconds": seconds,
                            "mb_s": moved / seconds / 1e6,
                            "records_moved": sum(p["records_sent"] for p in r["per_rank"]),
                            "records_kept": sum(p["records_kept"] for p in r["per_rank"]),
                            "computed": r["computed"],
                            "whole_seconds": max(p["seconds"] for p in r["per_rank"])})
    rate = statistics.median(x["mb_s"] for x in reshard)
    loop_rate = statistics.median(loop)
    report = {"cpu": cpu_name(), "cores": os.cpu_count(), "samples": a.limit,
              "cache_records": build.get("cache_records"), "record_bytes": build.get("bytes"),
              "loopback_mb_s": loop, "reshard": reshard,
              "median_loopback_mb_s": loop_rate, "median_reshard_mb_s": rate,
              "reshard_over_loopback": rate / loop_rate, "env": env_note}
    text = json.dumps(report)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
