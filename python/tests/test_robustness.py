"""A killed recycle.build resumes to the same cache; reading a cache larger than the reader's
memory keeps memory flat."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import torch

import recycle

# A build in a child process: 1,200 samples in chunks of 50, an elementwise prefix (so a sample's
# record does not depend on which samples share its forward) that sleeps in every call, so a kill
# lands in the middle, and flushes after every chunk. It prints "started" once its first chunk
# is written.
CHILD = textwrap.dedent("""
    import json, sys, time, torch, recycle
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1200, 2, 6, 6, generator=g)
    y = torch.randint(0, 3, (1200,), generator=g)
    data = list(zip(x, y.tolist()))
    calls = [0]
    def prefix(batch):
        calls[0] += 1
        if calls[0] == 3:
            print("started", flush=True)
        if sys.argv[2] == "slow":
            time.sleep(0.05)
        return torch.tanh(batch * 1.7 - 0.2)[:, :, ::2, ::2].contiguous()
    flush = 0 if sys.argv[2] == "slow" else 10
    print(json.dumps(recycle.build(sys.argv[1], data, prefix, model_id="elementwise", codec="fp32",
                                   batch_size=50, flush_seconds=flush)), flush=True)
""")


def child(cache, mode):
    env = dict(os.environ)
    return subprocess.Popen([sys.executable, "-c", CHILD, str(cache), mode], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(cache, mode="fast"):
    p = child(cache, mode)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # the report build returned


def read_all(cache):
    ds = recycle.CachedDataset(cache)
    return ds.read(range(len(ds)))


def test_a_killed_build_resumes_to_the_same_cache(tmp_path):
    reference = tmp_path / "reference"
    finish(reference)
    want_x, want_y = read_all(reference)
    for i, delay in enumerate([0.0, 0.25, 0.6]):
        cache = tmp_path / f"killed{i}"
        kept = 0
        for kill in range(2):  # killed twice, the second time while it resumes
            p = child(cache, "slow")
            assert p.stdout.readline().strip() == "started"
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            p.wait()
            assert p.returncode == -signal.SIGKILL
            # What survived: a prefix of the split, at least the chunk written before "started"
            # (flush_seconds=0), equal to the uninterrupted build's.
            partial = recycle.CachedDataset(cache, allow_partial=True)
            assert not partial.complete
            assert len(partial) >= kept + 50, (delay, kill, kept, len(partial))
            kept = len(partial)
            x, y = partial.read(range(kept))
            assert torch.equal(x, want_x[:kept]) and torch.equal(y, want_y[:kept])
        report = finish(cache)
        assert report["samples"] == 1200 and report["records"] == 1200
        assert report["computed"] == 1200 - kept  # only what the kills lost
        got_x, got_y = read_all(cache)
        assert torch.equal(got_x, want_x) and torch.equal(got_y, want_y)
        assert recycle.verify(cache)["checked"] == 1200
        assert finish(cache)["computed"] == 0


def test_readers_beside_a_running_build_see_whole_chunks(tmp_path):
    reference = tmp_path / "reference"
    finish(reference)
    want_x, want_y = read_all(reference)
    cache = tmp_path / "cache"
    p = child(cache, "slow")
    try:
        assert p.stdout.readline().strip() == "started"
        seen = []
        while p.poll() is None and len(seen) < 20:
            try:
                done = recycle.CachedDataset(cache)
                # Opened without allow_partial: only once the build marked the split complete
                # (the child may still be exiting).
                assert done.complete and len(done) == 1200
                break
            except RuntimeError as e:
                assert "incomplete" in str(e), str(e)
            ds = recycle.CachedDataset(cache, allow_partial=True)
            x, y = ds.read(range(len(ds)))
            assert len(ds) % 50 == 0  # whole chunks only
            assert torch.equal(x, want_x[:len(ds)]) and torch.equal(y, want_y[:len(ds)])
            seen.append(len(ds))
            time.sleep(0.05)
        assert seen == sorted(seen) and len(set(seen)) > 1, seen  # the reader saw the build advance
    finally:
        out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    got_x, got_y = read_all(cache)
    assert torch.equal(got_x, want_x) and torch.equal(got_y, want_y)


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def test_memory_stays_flat_over_a_cache_larger_than_the_budget(tmp_path):
    n = 4000
    x = torch.arange(n * 16, dtype=torch.float32).reshape(n, 16)
    data = list(zip(x, [i % 10 for i in range(n)]))
    freq = torch.arange(256, dtype=torch.float32) / 256

    def wide(batch):  # 4,096 floats a sample: 64 MB of fp32 records in all
        return torch.sin(batch[:, :, None] * freq).reshape(len(batch), 4096)

    report = recycle.build(tmp_path / "big", data, wide, model_id="wide", codec="fp32", batch_size=500)
    assert report["bytes"] > 60e6
    del data, x

    def measure(passes):
        readings = []
        for step in passes:
            step()
            readings.append(rss_mb())
        return readings

    ds = recycle.CachedDataset(tmp_path / "big", block_cache_mb=4)
    loader = recycle.CachedLoader(tmp_path / "big", "train", batch_size=100, block_cache_mb=4)

    def dataset_pass():
        return [lambda lo=lo: ds.read(range(lo, lo + 100)) for lo in range(0, n, 100)]

    def loader_pass():
        it = iter(loader)
        return [lambda: next(it) for _ in range(len(loader))]

    # Two passes each. The first may warm up (the prefetch thread's malloc arena, LibTorch's
    # pools: about 20 MB here) but stays well below the 64 MB it reads; the second, warm, pass
    # holds flat. Holding the records would grow by 64 MB a pass.
    for name, one_pass in (("dataset", dataset_pass), ("loader", loader_pass)):
        first, second = measure(one_pass()), measure(one_pass())
        warm_up = max(first) - first[0]
        assert warm_up < 40, f"{name}: RSS grew {warm_up:.1f} MB over the first pass ({first[::8]})"
        growth = max(second) - second[0]
        assert growth < 12, f"{name}: RSS grew {growth:.1f} MB over a warm pass ({second[::8]})"
