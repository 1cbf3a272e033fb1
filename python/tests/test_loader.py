"""recycle.CachedLoader: epochs, ranks, determinism, and agreement with CachedDataset."""
import pytest
import torch

import recycle


def collect(loader):
    xs, ys = zip(*loader)
    return torch.cat(xs), torch.cat(ys)


def test_unshuffled_batches_are_the_split_in_order(cli_fp32):
    ds = recycle.CachedDataset(cli_fp32)
    ref, ref_y = ds.read(range(len(ds)))
    for prefetch in (0, 2):
        loader = recycle.CachedLoader(cli_fp32, "train", batch_size=64, shuffle=False, prefetch=prefetch)
        assert len(loader) == 4 and loader.samples == 200
        sizes = [len(y) for _, y in loader]
        assert sizes == [64, 64, 64, 8]
        x, y = collect(loader)
        assert torch.equal(x, ref) and torch.equal(y, ref_y)


def test_shuffled_epochs_cover_the_split_and_differ_and_repeat_by_seed(cli_fp32):
    ds = recycle.CachedDataset(cli_fp32)
    ref, _ = ds.read(range(len(ds)))
    loader = recycle.CachedLoader(cli_fp32, "train", batch_size=50, seed=7)
    e0, _ = collect(loader)
    e1, _ = collect(loader)
    # Each epoch is a permutation of the split's rows.
    key = lambda t: sorted(map(tuple, t.flatten(1).tolist()))
    assert key(e0) == key(ref) == key(e1)
    assert not torch.equal(e0, e1)
    again = recycle.CachedLoader(cli_fp32, "train", batch_size=50, seed=7)
    assert torch.equal(collect(again)[0], e0)
    again.set_epoch(1)
    assert torch.equal(collect(again)[0], e1)


def test_ranks_share_an_epoch_as_distributed_sampler_does(cli_fp32):
    parts = [collect(recycle.CachedLoader(cli_fp32, "test", batch_size=16, seed=1, rank=r, world_size=3))
             for r in range(3)]
    assert [len(y) for _, y in parts] == [34, 34, 34]  # 100 samples padded to 102
    rows = torch.cat([x for x, _ in parts])
    assert len({tuple(r.flatten().tolist()) for r in rows}) == 100


def test_drop_last_and_bad_arguments(cli_fp32):
    loader = recycle.CachedLoader(cli_fp32, "train", batch_size=64, drop_last=True)
    assert len(loader) == 3 and [len(y) for _, y in loader] == [64, 64, 64]
    for kwargs in (dict(batch_size=0), dict(batch_size=2.5), dict(rank=2, world_size=2),
                   dict(world_size=0), dict(prefetch=-1), dict(seed=-1)):
        with pytest.raises(ValueError):
            recycle.CachedLoader(cli_fp32, "train", **kwargs)
    with pytest.raises(RuntimeError, match="no split"):
        recycle.CachedLoader(cli_fp32, "nope")


def test_a_split_of_augmented_views_gives_one_view_per_epoch(tmp_path):
    """recycle-build --augment crop=2 --views 2: CachedLoader draws one view of each sample per
    epoch as recycle-train does (2 epochs: each view once); CachedDataset reads view 0."""
    from conftest import CLI_COMMON, run_tool
    cache = tmp_path / "views"
    run_tool("recycle-build", *CLI_COMMON, "--split", "train", "--limit", "60", "--augment",
             "crop=2", "--views", "2", "--codec", "fp32", "--cache", cache)
    ds = recycle.CachedDataset(cache)
    view0, _ = ds.read(range(60))
    loader = recycle.CachedLoader(cache, "train", batch_size=16, shuffle=False)
    e0, e1 = collect(loader)[0], collect(loader)[0]
    differ = 0
    for p in range(60):
        rows = [e0[p], e1[p]]
        assert any(torch.equal(r, view0[p]) for r in rows), p  # view 0 in one of the 2 epochs
        differ += not torch.equal(e0[p], e1[p])
    assert differ > 30  # the other epoch read the other view (a random crop: mostly different)


def test_two_live_iterators_are_two_epochs_of_their_own(cli_fp32):
    """Issue 54 item 3: ia=iter(L); ib=iter(L); next(ia) -- ib is a whole epoch, and ia goes on
    with its own (they shared one stream: ib took ia's batches, `8 0`)."""
    loader = recycle.CachedLoader(cli_fp32, "train", batch_size=25, seed=3)
    ia, ib = iter(loader), iter(loader)
    first = next(ia)
    in_b = [x for x, _ in ib]
    rest = [x for x, _ in ia]
    assert (len(in_b), len(rest)) == (8, 7)
    # ia is epoch 0 and ib epoch 1 (each drawn at iter()), as one iterator after another gives.
    ref = recycle.CachedLoader(cli_fp32, "train", batch_size=25, seed=3)
    assert torch.equal(torch.cat([first[0]] + rest), collect(ref)[0])
    assert torch.equal(torch.cat(in_b), collect(ref)[0])
    # Nested loops over one loader, and a loop left early (its loader is free again).
    assert sum(1 for _ in loader for _ in loader) == 8 * 8
    for _ in loader:
        break
    assert len(list(loader)) == 8


# The two-iterator pattern, and the engine loader told to start epochs mid-epoch, in a process of
# its own: under torch 2.11 it aborted at exit ("terminate called without an active exception").
TWO_ITERATORS = """
import sys, recycle
loader = recycle.CachedLoader(sys.argv[1], "train", batch_size=25, shuffle=False)
ia = iter(loader); ib = iter(loader); next(ia)
print(sum(1 for _ in ib), sum(1 for _ in ia))
kept = [x for x, _ in loader]          # batches the caller keeps while the loader reads ahead
native = loader._native
native.start_epoch(0); native.next(); native.next()
native.start_epoch(1)                  # mid-epoch: the plan under way stops, the new one runs
n = 0
while native.next() is not None:
    n += 1
print(n)
native.start_epoch(2); kept.append(native.next()); native.start_epoch(3); native.next()
print("left mid-epoch", len(kept))     # and the interpreter exits with the loader reading ahead
"""


def test_starting_epochs_mid_epoch_and_exiting_mid_epoch_is_safe(cli_fp32, tmp_path):
    import subprocess
    import sys
    script = tmp_path / "two.py"
    script.write_text(TWO_ITERATORS)
    for _ in range(3):
        r = subprocess.run([sys.executable, str(script), str(cli_fp32)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.split("\n")[:3] == ["8 7", "8", "left mid-epoch 9"], r.stdout


def test_a_loader_given_anothers_state_resumes_its_epoch_mid_way(cli_fp32):
    """state_dict() after some batches of epoch 1; a new loader (a rerun) given it gives the
    rest of that epoch, the same samples in the same order, then epoch 2 as the first would."""
    first = recycle.CachedLoader(cli_fp32, "train", batch_size=32, seed=5)
    assert first.state_dict()["epoch"] == 0 and first.state_dict()["batches"] == 0
    list(first)  # epoch 0
    assert (first.state_dict()["epoch"], first.state_dict()["batches"]) == (1, 0)
    it = iter(first)
    taken = [next(it) for _ in range(3)]
    state = first.state_dict()
    assert (state["epoch"], state["batches"]) == (1, 3)
    rest = list(it)
    following = list(first)  # epoch 2
    for resume_via_set_epoch in (False, True):
        again = recycle.CachedLoader(cli_fp32, "train", batch_size=32, seed=5)
        again.load_state_dict(state)
        if resume_via_set_epoch:  # a DistributedSampler-style loop names the epoch: kept
            again.set_epoch(1)
        got = list(again)
        assert len(got) == len(rest) == len(first) - 3 and len(taken) == 3
        for (x, y), (want_x, want_y) in zip(got, rest):
            assert torch.equal(x, want_x) and torch.equal(y, want_y)
        assert again.state_dict()["epoch"] == 2
        for (x, _), (want_x, _) in zip(again, following):
            assert torch.equal(x, want_x)
    other = recycle.CachedLoader(cli_fp32, "train", batch_size=32, seed=6)
    with pytest.raises(ValueError, match="seed 5, this one has 6"):
        other.load_state_dict(state)
    for bad in ({"epoch": 1}, dict(state, batches=len(first) + 1), dict(state, epoch=-1)):
        with pytest.raises(ValueError):
            first.load_state_dict(bad)
    done = recycle.CachedLoader(cli_fp32, "train", batch_size=32, seed=5)
    done.load_state_dict(dict(state, batches=len(first)))  # the epoch's last batch was given
    assert list(done) == [] and len(list(done)) == len(first)  # then epoch 2, whole
