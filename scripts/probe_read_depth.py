#!/usr/bin/env python3
"""What a disk gives to 100 KB reads at random places with 1 to 32 in flight (threads of
os.pread), against reading the same files in order 1 MB at a time, the page cache dropped before
each (root only): why ActivationStore reads a batch's records on several threads
(cache/read_pool.h, docs/scale.md).

Usage: sudo python3 scripts/probe_read_depth.py DIR [GB]   (the *.sst and *.blob files of DIR;
GB read at each depth, default 1.5)
"""
import os, sys, time, random, glob, threading
files = sorted(glob.glob(sys.argv[1] + "/*.sst") + glob.glob(sys.argv[1] + "/*.blob"))
total_budget = int(float(sys.argv[2]) * 1e9) if len(sys.argv) > 2 else int(1.5e9)
REC = 100 * 1024
def drop():
    os.sync(); open("/proc/sys/vm/drop_caches", "w").write("1\n")
sizes = [os.path.getsize(f) for f in files]
fds = [os.open(f, os.O_RDONLY) for f in files]
for fd in fds: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
offs = [(i, o) for i, s in enumerate(sizes) for o in range(0, s - REC, REC)]
def rand_read(threads):
    random.seed(threads)
    work = random.sample(offs, total_budget // REC)
    drop()
    lock = threading.Lock(); it = iter(work)
    def run():
        while True:
            with lock:
                w = next(it, None)
            if w is None: return
            os.pread(fds[w[0]], REC, w[1])
    t0 = time.time()
    ts = [threading.Thread(target=run) for _ in range(threads)]
    [t.start() for t in ts]; [t.join() for t in ts]
    dt = time.time() - t0
    print(f"random 100KB preads, {threads:2d} threads: {len(work)*REC/dt/1e6:7.0f} MB/s", flush=True)
def seq():
    drop(); t0 = time.time(); n = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while True:
                b = fh.read(1 << 20)
                if not b: break
                n += len(b)
            if n > total_budget * 2: break
    dt = time.time() - t0
    print(f"sequential 1MB reads: {n/dt/1e6:7.0f} MB/s", flush=True)
seq()
for t in [1, 2, 4, 8, 16, 32]:
    rand_read(t)
seq()
