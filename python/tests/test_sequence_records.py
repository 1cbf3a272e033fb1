"""recycle.build of inputs as users have them for text: one text's unpadded tokenizer output (a
dict of 1-D tensors whose length varies from sample to sample) and raw strings with a tokenizer;
records as long as the text (the positions the mask keeps, no padding), read back padded to each
batch's longest with the mask rebuilt, and trained by recycle-train --script-head. No
transformers needed: a small tokenizer of its own stands in for one."""
import json

import pytest
import torch

import recycle
from conftest import run_tool

WORDS = "the build failed again win a free prize now click here notes from review ok".split()


class Tokenizer:
    """A tokenizer as transformers' are called: ids of whitespace words (1 + the word's index, 98
    for another word, 0 is padding, 99 marks the start), padded to the batch's longest, with the
    attention mask."""
    pad_token_id = 0

    def __call__(self, texts, padding=True, truncation=True, return_tensors="pt"):
        rows = [[99] + [1 + WORDS.index(w) if w in WORDS else 98 for w in t.split()]
                for t in texts]
        longest = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), longest, dtype=torch.int64)
        mask = torch.zeros(len(rows), longest, dtype=torch.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r)
            mask[i, :len(r)] = 1
        return {"input_ids": ids, "attention_mask": mask}


class Prefix(torch.nn.Module):
    """A tokenizer's batch to {"hidden": [B, L, 4], "mask": [B, L]}: an embedding, zero where
    the mask is (so padding is visible if it were stored)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(100, 4)
        self.calls = 0

    def forward(self, batch):
        self.calls += len(batch["input_ids"])
        m = batch["attention_mask"]
        return {"hidden": self.emb(batch["input_ids"]) * m[..., None], "mask": m}


def texts():
    t = ["the build failed again", "win a free prize now", "ok", "notes from review",
         "click here", "the build failed again", "win a free prize now click here now"]
    return [(s, i % 2) for i, s in enumerate(t)]


def one_text(text):
    """One text's unpadded tokenizer output: 1-D tensors."""
    out = Tokenizer()([text])
    return {k: v[0] for k, v in out.items()}


def test_unpadded_tokenizer_outputs_are_stored_as_long_as_the_text(tmp_path):
    data = [(one_text(s), y) for s, y in texts()]
    prefix = Prefix()
    r = recycle.build(tmp_path / "c", data, prefix, codec="fp32", batch_size=3, progress=False)
    assert r["samples"] == 7 and r["unique"] == 6 and r["computed"] == 6  # one duplicate text
    info = recycle.inspect(tmp_path / "c")
    layout = {t["name"]: t["shape"] for t in info["record_layout"]}
    assert layout == {"hidden": [-1, 4], "mask": [-1]}
    assert info["keyer"] == "xxh3"
    ds = recycle.CachedDataset(tmp_path / "c")
    for i, (s, _) in enumerate(texts()):
        features, _ = ds[i]
        n = len(s.split()) + 1
        assert features["hidden"].shape == (n, 4) and torch.equal(features["mask"], torch.ones(n, dtype=torch.int64))
        want = prefix.emb(one_text(s)["input_ids"])
        assert torch.equal(features["hidden"], want.detach())
    # A rebuild computes nothing; one changed token is computed alone.
    prefix.calls = 0
    again = recycle.build(tmp_path / "c", data, prefix, codec="fp32", batch_size=3, progress=False)
    assert again["computed"] == 0 and again["index_written"] == 0 and prefix.calls == 1  # the probe
    changed = list(data)
    changed[2] = (one_text("ok ok"), changed[2][1])
    third = recycle.build(tmp_path / "c", changed, prefix, codec="fp32", batch_size=3, progress=False)
    assert third["computed"] == 1 and third["index_written"] == 1


def test_texts_with_a_tokenizer_are_keyed_by_the_text(tmp_path):
    data = texts()
    prefix = Prefix()
    with pytest.raises(ValueError) as e:
        recycle.build(tmp_path / "none", data, prefix, progress=False)
    assert str(e.value) == ("data: inputs are texts: pass tokenizer= (a transformers tokenizer): "
                            "the texts are keyed as they are and tokenized for the prefix")
    r = recycle.build(tmp_path / "c", data, prefix, codec="fp32", batch_size=4,
                      tokenizer=Tokenizer(), progress=False)
    assert r["unique"] == 6 and r["computed"] == 6
    info = recycle.inspect(tmp_path / "c")
    assert info["keyer"] == "text"
    # The same records as the texts' tokenizer outputs give (another cache, keyed otherwise).
    ds = recycle.CachedDataset(tmp_path / "c")
    features, label = ds[6]
    assert features["hidden"].shape == (9, 4) and label == 0
    assert torch.equal(features["hidden"], prefix.emb(one_text(data[6][0])["input_ids"]).detach())


def test_batches_are_padded_to_their_longest_with_the_mask_rebuilt(tmp_path):
    data = [(one_text(s), y) for s, y in texts()]
    recycle.build(tmp_path / "c", data, Prefix(), codec="fp32", batch_size=3, progress=False)
    lengths = [len(s.split()) + 1 for s, _ in texts()]
    loader = recycle.CachedLoader(tmp_path / "c", batch_size=3, shuffle=False)
    seen = 0
    for features, labels in loader:
        want = lengths[seen:seen + len(labels)]
        assert features["hidden"].shape == (len(labels), max(want), 4)
        assert features["mask"].tolist() == [[1] * n + [0] * (max(want) - n) for n in want]
        assert float(features["hidden"][features["mask"] == 0].abs().sum()) == 0
        seen += len(labels)
    assert seen == 7


class MeanHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, hidden, mask):
        m = mask.unsqueeze(-1).to(hidden.dtype)
        return self.fc((hidden * m).sum(1) / m.sum(1).clamp(min=1.0))


def test_recycle_train_trains_a_script_head_on_records_as_long_as_the_text(tmp_path):
    data = [(one_text(s), y) for s, y in texts()] * 4
    for split in ("train", "test"):
        recycle.build(tmp_path / "c", data, Prefix(), split=split, codec="fp16", batch_size=5,
                      progress=False)
    torch.jit.script(MeanHead()).save(str(tmp_path / "head.pt"))
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--script-head", tmp_path / "head.pt",
                 "--epochs", "2", "--batch", "4", "--json")
    report = json.loads(r.stdout.splitlines()[-1])
    assert report["test_samples"] == 28 and 0 <= report["test_acc"] <= 1, report
    # A Python prefix's cache: the engine knows no recycle ratio, and does not say 0 (full
    # fine-tuning's).
    assert report["mode"] == "cache" and report["recycle"] is None, report
    # --preload holds records of one shape: these vary in length, so it is refused up front.
    r = run_tool("recycle-train", "--cache", tmp_path / "c", "--script-head", tmp_path / "head.pt",
                 "--epochs", "1", "--preload", check=False)
    assert r.returncode == 2 and "vary in length (use --prefetch)" in r.stderr, r.stderr


def test_named_inputs_are_refused_where_they_cannot_be_built(tmp_path):
    data = [(one_text(s), y) for s, y in texts()]
    with pytest.raises(ValueError) as e:
        recycle.build(tmp_path / "c", data, Prefix(), keyer="text", progress=False)
    assert str(e.value) == ("keyer 'text' does not key named tensors: use keyer=\"tensor\" (xxh3) "
                            "or \"id\"")
    with pytest.raises(ValueError) as e:
        recycle.build(tmp_path / "d", [(one_text("ok"), 0),
                                       ({"input_ids": ["x"], "attention_mask": [1]}, 1)], Prefix(),
                      progress=False)
    assert "input 'input_ids' must be a tensor (or a list of numbers), not list" in str(e.value)


class ShortTokenizer(Tokenizer):
    """The same vocabulary, texts cut at 3 tokens (another max_length)."""

    def __call__(self, texts, padding=True, truncation=True, return_tensors="pt"):
        out = super().__call__(texts, padding, truncation, return_tensors)
        return {k: v[:, :3] for k, v in out.items()}


def test_build_reports_the_splits_records_and_the_caches(tmp_path):
    data = texts()
    train = recycle.build(tmp_path / "c", data[:4], Prefix(), tokenizer=Tokenizer(), progress=False)
    test = recycle.build(tmp_path / "c", data[3:], Prefix(), split="test", tokenizer=Tokenizer(),
                         progress=False)
    assert (train["records"], train["cache_records"]) == (4, 4)
    # data[3:] holds 4 distinct texts, 2 of them stored by train's build.
    assert (test["unique"], test["records"], test["computed"], test["cache_records"]) == (4, 4, 2, 6)


def test_a_text_cache_refuses_another_tokenizer(tmp_path):
    recycle.build(tmp_path / "c", texts(), Prefix(), tokenizer=Tokenizer(), progress=False)
    with pytest.raises(recycle.StaleCacheError) as e:
        recycle.build(tmp_path / "c", texts(), Prefix(), tokenizer=ShortTokenizer(), progress=False)
    assert "preprocessing: the cache has python, tokenizer " in str(e.value)
    with pytest.raises(recycle.StaleCacheError) as e:
        recycle.CachedPrefix(tmp_path / "c", Prefix(), tokenizer=ShortTokenizer())
    assert "was built with another tokenizer: preprocessing: the cache has python, tokenizer" \
        in str(e.value)


def test_cached_prefix_serves_texts_hits_and_misses_padded_together(tmp_path):
    prefix = Prefix()
    recycle.build(tmp_path / "c", texts()[:4], prefix, codec="fp32", tokenizer=Tokenizer(),
                  progress=False)
    cached = recycle.CachedPrefix(tmp_path / "c", prefix, tokenizer=Tokenizer())
    batch = ["ok", "win a free prize now click here now", "the build failed again", "click here"]
    out = cached(batch)
    assert (cached.hits, cached.misses) == (2, 2)
    with torch.no_grad():
        want = prefix(Tokenizer()(batch))
    assert torch.equal(out["mask"], want["mask"])  # padded to the longest (a miss), mask rebuilt
    assert torch.equal(out["hidden"], want["hidden"])
    # Named inputs: the same, keyed by their tensors.
    recycle.build(tmp_path / "n", [(one_text(s), y) for s, y in texts()[:4]], prefix,
                  codec="fp32", progress=False)
    named = recycle.CachedPrefix(tmp_path / "n", prefix)
    out = named([one_text(s) for s in batch])
    assert (named.hits, named.misses) == (2, 2)
    assert torch.equal(out["mask"], want["mask"]) and torch.equal(out["hidden"], want["hidden"])


def test_cached_prefix_refusals_say_what_to_call_it_with(tmp_path):
    recycle.build(tmp_path / "c", texts(), Prefix(), tokenizer=Tokenizer(), progress=False)
    with pytest.raises(ValueError) as e:
        recycle.CachedPrefix(tmp_path / "c", Prefix())
    assert str(e.value) == (f"cache {tmp_path / 'c'} holds texts: pass tokenizer= (the one build "
                            "tokenized them with) to compute the misses")
    cached = recycle.CachedPrefix(tmp_path / "c", Prefix(), tokenizer=Tokenizer())
    with pytest.raises(ValueError) as e:
        cached(torch.zeros(2, 3, dtype=torch.int64))
    assert str(e.value) == (f"cache {tmp_path / 'c'} holds records as long as the text: call it "
                            "with what build was given (texts, or samples of named tensors), not "
                            "a tensor")
    with pytest.raises(ValueError) as e:
        cached([one_text("ok")])
    assert str(e.value) == (f"cache {tmp_path / 'c'} was built from texts: call it with texts, "
                            "not named tensors")
    with pytest.raises(ValueError) as e:  # the engine's predict has no prefix to run misses
        recycle.predict(tmp_path / "c", tmp_path / "head.pt", None, "tsv:x.tsv", tmp_path / "p")
    assert str(e.value) == (f"cache {tmp_path / 'c'} was filled by a Python prefix "
                            "(python:test_sequence_records.Prefix, through recycle.build), which "
                            "recycle.predict cannot run for its misses: use recycle.CachedPrefix("
                            "path, prefix, tokenizer=tokenizer)(texts) and apply your head to its "
                            "output")


def test_collate_pads_cached_dataset_items_as_the_loader_does(tmp_path):
    recycle.build(tmp_path / "c", texts(), Prefix(), tokenizer=Tokenizer(), progress=False)
    ds = recycle.CachedDataset(tmp_path / "c")
    features, labels = recycle.collate([ds[i] for i in range(len(ds))])
    (want, want_labels), = list(recycle.CachedLoader(tmp_path / "c", batch_size=7, shuffle=False))
    assert torch.equal(labels, want_labels)
    assert torch.equal(features["mask"], want["mask"])
    assert torch.equal(features["hidden"], want["hidden"])


def test_group_by_length_gives_batches_of_similar_length(tmp_path):
    words = WORDS * 3
    data = [(" ".join(words[:1 + i % 12]), i % 2) for i in range(96)]  # 1 to 12 words
    recycle.build(tmp_path / "c", data, Prefix(), tokenizer=Tokenizer(), progress=False)

    def padding(loader):
        pad = seen = 0
        for features, labels in loader:
            pad += int((features["mask"] == 0).sum())
            seen += len(labels)
        assert seen == 96
        return pad

    plain = padding(recycle.CachedLoader(tmp_path / "c", batch_size=4, seed=1))
    grouped = recycle.CachedLoader(tmp_path / "c", batch_size=4, seed=1, group_by_length=True)
    assert padding(grouped) < plain / 3
    first, _ = next(iter(recycle.CachedLoader(tmp_path / "c", batch_size=4, seed=1,
                                              group_by_length=True)))
    assert first["mask"].shape[1] == 13  # the longest text (12 words and the start) comes first
    fixed = tmp_path / "f"
    recycle.build(fixed, [(torch.ones(3) * i, 0) for i in range(8)], lambda x: x * 2,
                  model_id="double", progress=False)
    with pytest.raises(ValueError) as e:
        recycle.CachedLoader(fixed, batch_size=4, group_by_length=True)
    assert str(e.value) == (f"group_by_length: the records of split train of cache {fixed} are "
                            "all of one shape: there is no length to group them by")
