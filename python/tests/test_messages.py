"""The package's answers to arguments a user gets wrong (messages that say what to fix), a
failed build that leaves a cache, a loader in a forked child, batched DataLoader reads, and
the prefix share a build reports."""
import os

import pytest
import torch

import recycle
from conftest import run_tool
from test_build import make_data, prefix


def test_outputs_that_are_not_one_dense_row_per_input_are_named(tmp_path):
    data = make_data(n=20)
    with pytest.raises(ValueError, match="'activation' is a torch.sparse_coo tensor.*to_dense"):
        recycle.build(tmp_path / "a", data, lambda x: x.reshape(len(x), -1).to_sparse(), model_id="s")
    with pytest.raises(ValueError, match="'activation' is a 0-d tensor for a batch of 1 inputs"):
        recycle.build(tmp_path / "b", data, lambda x: x.sum(), model_id="z")
    with pytest.raises(ValueError, match="'tensor1' is 1 rows for a batch of"):
        recycle.build(tmp_path / "c", data, lambda x: (x, x[:1]), model_id="r")


def test_items_of_three_and_a_huge_batch_size_and_nan_flush_seconds(tmp_path):
    x = torch.randn(12, 1, 4, 4)
    triples = [(x[i], i % 3, i) for i in range(12)]
    with pytest.raises(ValueError, match="gives 3 items per sample; build stores \\(input, label\\)"):
        recycle.build(tmp_path / "t", triples, lambda b: b * 2, model_id="double")
    pairs = [(x[i], i % 3) for i in range(12)]
    with pytest.raises(ValueError, match="flush_seconds must be a number of seconds"):
        recycle.build(tmp_path / "n", pairs, lambda b: b * 2, model_id="double", flush_seconds=float("nan"))
    # A batch larger than the data is the data in one batch (no list of 2^63 slots first).
    report = recycle.build(tmp_path / "h", pairs, lambda b: b * 2, model_id="double",
                           batch_size=2 ** 63 - 1)
    assert report["samples"] == 12 and report["computed"] == 12


def test_a_build_that_fails_leaves_a_cache_that_inspects_and_resumes(tmp_path):
    data, net = make_data(n=200), prefix()
    calls = [0]

    def failing(x):
        calls[0] += 1
        if calls[0] == 2:  # the first call is the layout probe: fail on the first batch
            raise RuntimeError("out of memory, say")
        return net(x)

    cache = tmp_path / "c"
    with pytest.raises(RuntimeError, match="out of memory, say"):
        recycle.build(cache, data, failing, model_id="net", batch_size=50)
    info = recycle.inspect(cache)  # a cache with its manifest, the split marked incomplete
    assert info["splits"]["train"]["complete"] is False
    report = recycle.build(cache, data, lambda x: net(x), model_id="net", batch_size=50)
    assert report["computed"] == 200
    assert recycle.verify(cache)["ok"]


def test_verify_without_raising_reports_a_cache_it_cannot_open(tmp_path):
    report = recycle.verify(tmp_path / "nothing-here", raise_on_error=False)
    assert report["ok"] is False and report["checked"] == 0
    assert len(report["problems"]) == 1 and "nothing-here" in report["problems"][0]
    with pytest.raises(RuntimeError):
        recycle.verify(tmp_path / "nothing-here")


def test_a_loader_used_in_a_forked_child_raises_instead_of_hanging(cli_fp32):
    loader = recycle.CachedLoader(cli_fp32, batch_size=50, shuffle=False)
    assert len(list(loader)) == 4
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what iterating did, then leave without cleanup
        os.close(read)
        try:
            next(iter(loader))
            message = "no error"
        except RuntimeError as e:
            message = str(e)
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    os.waitpid(pid, 0)
    assert "cannot be used in a fork()ed child process" in message
    assert len(list(loader)) == 4  # the parent's loader still works


def test_dataloader_batches_read_at_once_equal_item_reads(cli_fp32):
    ds = recycle.CachedDataset(cli_fp32)
    items = ds.__getitems__([7, 0, 7, 199])
    for (x, y), i in zip(items, [7, 0, 7, 199]):
        want_x, want_y = ds[i]
        assert torch.equal(x, want_x) and y == want_y
    ref, labels = ds.read(range(len(ds)))
    xs, ys = zip(*torch.utils.data.DataLoader(ds, batch_size=64, shuffle=False))
    assert torch.equal(torch.cat(xs), ref) and torch.equal(torch.cat(ys), labels)


def test_a_head_given_to_build_measures_the_prefix_share(tmp_path):
    data, net = make_data(n=300), prefix()
    head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
    report = recycle.build(tmp_path / "c", data, net, batch_size=100, head=head)
    s = report["prefix_share"]
    assert 0 < s < 1
    assert report["expected_speedup_vs_full"] == pytest.approx(1 / (1 - s))
    assert report["expected_speedup_vs_online"] == pytest.approx((s + 3 * (1 - s)) / (3 * (1 - s)))
    assert "prefix_share" not in recycle.build(tmp_path / "d", data, net, batch_size=100)
    with pytest.raises(ValueError, match="head must be"):
        recycle.build(tmp_path / "e", data, net, head="not callable")


def test_a_loader_device_this_process_cannot_use_is_refused(cli_fp32):
    x, y = next(iter(recycle.CachedLoader(cli_fp32, batch_size=8, shuffle=False, device="cpu")))
    assert x.device.type == "cpu" and y.device.type == "cpu"
    with pytest.raises(ValueError, match="expected cpu, cuda or cuda:N"):
        recycle.CachedLoader(cli_fp32, device="tpu")
    if torch.cuda.is_available():
        x, y = next(iter(recycle.CachedLoader(cli_fp32, batch_size=8, device="cuda")))
        assert x.is_cuda and y.is_cuda
    else:
        with pytest.raises(ValueError, match=r"^device cuda: ") as e:  # the engine's rule
            recycle.CachedLoader(cli_fp32, device="cuda")
        assert "\n" not in str(e.value)
        # The engine's loader refuses it too, in one line naming the option.
        with pytest.raises(ValueError, match=r"^device cuda: ") as e:
            options = recycle._native.LoaderOptions()
            options.reader.cache_dir = str(cli_fp32)
            options.prefetch = 0
            options.device = "cuda"
            recycle._native.CacheLoader(options)
        assert "\n" not in str(e.value)


def test_strings_as_inputs_or_labels_say_what_build_takes(tmp_path):
    """Issue 54 item 12, issue 57 item 2: texts need a tokenizer; labels are class ids."""
    texts = [("a sentence", 0), ("another one", 1)] * 4
    with pytest.raises(ValueError, match=r"^data: inputs are texts: pass tokenizer= \(a "
                                         r"transformers tokenizer\)"):
        recycle.build(tmp_path / "t", texts, lambda b: b, model_id="text")
    assert not (tmp_path / "t").exists()  # refused before the cache is made
    named = [(torch.randn(3), "cat"), (torch.randn(3), "dog")] * 4
    with pytest.raises(ValueError, match=r"^data: labels must be integers \(class ids\), not strings"):
        recycle.build(tmp_path / "l", named, lambda b: b, model_id="names")


def test_a_prefix_on_the_meta_device_is_refused_naming_it(tmp_path):
    net = torch.nn.Sequential(torch.nn.Linear(3, 2, device="meta"))
    data = [(torch.randn(3), 0)] * 4
    with pytest.raises(ValueError, match="^the prefix's '0.weight' is on the meta device") as e:
        recycle.build(tmp_path / "m", data, net)
    assert "\n" not in str(e.value)


class Compiled(torch.nn.Module):
    """What torch.compile returns (torch._dynamo's OptimizedModule): the module as _orig_mod."""

    def __init__(self, module):
        super().__init__()
        self._orig_mod = module

    def forward(self, x):
        return self._orig_mod(x)


def test_a_compiled_prefix_is_named_and_fingerprinted_as_its_module(tmp_path):
    data, net = make_data(n=40), prefix()
    wrapped = [Compiled(net)]
    if hasattr(torch, "compile"):
        wrapped.append(torch.compile(net, backend="eager"))
    for i, compiled in enumerate(wrapped):
        cache = tmp_path / f"c{i}"
        recycle.build(cache, data, compiled, batch_size=20)
        info = recycle.inspect(cache)
        assert info["model"] == "python:torch.nn.modules.container.Sequential", info["model"]
        # The same prefix uncompiled finds its records: the same identity.
        assert recycle.build(cache, data, net, batch_size=20)["computed"] == 0


def test_devices_follow_the_tools_rule(cli_fp32):
    """cpu:0 and cpu:5 are refused, as recycle-train --device refuses them."""
    for device in ("cpu:0", "cpu:5", torch.device("cpu", 5), "cuda:x", "tpu"):
        with pytest.raises(ValueError, match=f"^device {device}: expected cpu, cuda or cuda:N$"):
            recycle.CachedLoader(cli_fp32, device=device)
    r = run_tool("recycle-train", "--cache", cli_fp32, "--device", "cpu:0", check=False)
    assert r.returncode != 0 and "--device cpu:0: expected cpu, cuda or cuda:N" in r.stderr
    assert recycle.CachedLoader(cli_fp32, device=torch.device("cpu")).device == torch.device("cpu")
