"""recycle.CachedPrefix: a prefix's outputs from the cache for hits, from the prefix for misses."""
import pytest
import torch

import recycle
from test_build import expected, make_data, prefix


class Counting(torch.nn.Module):
    """A prefix that counts the samples it runs on (and returns two named outputs when asked)."""

    def __init__(self, net, two=False):
        super().__init__()
        self.net, self.two, self.seen = net, two, 0

    def forward(self, x):
        self.seen += len(x)
        out = self.net(x)
        return {"features": out, "pooled": out.mean((2, 3))} if self.two else out


def test_hits_read_the_cache_and_only_misses_run_the_prefix(tmp_path):
    data, net = make_data(n=200), Counting(prefix())
    recycle.build(tmp_path / "c", data, net, codec="fp32", batch_size=64)
    built = net.seen
    cached = recycle.CachedPrefix(tmp_path / "c", net)
    assert cached.names == ["activation"]
    x = torch.stack([data[i][0] for i in range(200)])
    out = cached(x)
    assert net.seen == built  # every sample a hit: the prefix did not run
    assert (cached.hits, cached.misses) == (200, 0)
    # fp32 records: the prefix's outputs (computed in other batch sizes: to their rounding)
    assert torch.allclose(out, expected(net.net, data), rtol=1e-5, atol=1e-6)

    # A batch of new samples and cached ones, interleaved: the prefix runs on the new ones only.
    new = make_data(n=50, seed=7)
    xn = torch.stack([new[i][0] for i in range(50)])
    mixed = torch.stack([xn[i // 2] if i % 2 else x[i // 2] for i in range(100)])
    net.train()  # CachedPrefix runs it in eval mode and leaves every submodule as it was
    net.net[1].eval()  # a frozen batch norm inside a model in train mode
    out = cached(mixed)
    assert net.training and net.net[0].training and not net.net[1].training
    assert net.seen == built + 50
    assert (cached.hits, cached.misses) == (250, 50)
    net.net.eval()
    with torch.no_grad():
        want = net.net(mixed)
    assert torch.allclose(out, want, atol=1e-6)

    # Every row a miss: the prefix's outputs as they are.
    out = cached(xn)
    assert net.seen == built + 100
    assert (cached.hits, cached.misses) == (250, 100)
    assert torch.allclose(out, want[1::2], atol=1e-6)


def test_several_outputs_come_back_by_name_and_fp16_hits_are_rounded(tmp_path):
    data, net = make_data(n=100), Counting(prefix(), two=True)
    recycle.build(tmp_path / "c", data, net, codec="fp16", batch_size=32)
    cached = recycle.CachedPrefix(tmp_path / "c", net)
    x = torch.stack([data[i][0] for i in range(100)])
    out = cached(x[:10])
    assert isinstance(out, dict) and list(out) == ["features", "pooled"]
    assert cached.hits == 10
    want = expected(net.net, data)[:10]
    assert torch.allclose(out["features"], want, rtol=2.0 ** -10, atol=1e-6)
    assert not torch.equal(out["features"], want)  # read from fp16 records, not recomputed


def test_another_prefix_a_wrong_shape_and_an_id_keyed_cache_are_refused(tmp_path):
    data = make_data(n=60)
    recycle.build(tmp_path / "c", data, prefix(0), batch_size=32)
    with pytest.raises(recycle.StaleCacheError, match="prefix fingerprint"):
        recycle.CachedPrefix(tmp_path / "c", prefix(1))  # other weights
    cached = recycle.CachedPrefix(tmp_path / "c", prefix(0))
    with pytest.raises(ValueError, match="shape"):
        cached(torch.zeros(4, 1, 10, 10))
    with pytest.raises(ValueError) as e:
        cached([1, 2])
    assert str(e.value) == ("CachedPrefix: inputs must be tensors, texts (with tokenizer=), or "
                            "dicts/tuples of tensors, not list")
    recycle.build(tmp_path / "ids", data, prefix(0), keyer="id", batch_size=32)
    with pytest.raises(ValueError, match="not by content"):
        recycle.CachedPrefix(tmp_path / "ids", prefix(0))
    with pytest.raises(RuntimeError):
        recycle.CachedPrefix(tmp_path / "none", prefix(0))


def test_a_cache_of_the_engine_is_refused_with_the_way_to_serve_it(cli_fp32):
    with pytest.raises(ValueError, match="recycle.predict"):
        recycle.CachedPrefix(cli_fp32, prefix(0))
