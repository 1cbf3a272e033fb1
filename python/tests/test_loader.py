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
