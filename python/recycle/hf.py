"""recycle.hf: a Hugging Face transformers encoder split at layer k into a prefix to cache and a
head to train, without model surgery (docs/hf.md).

    prefix, head = recycle.hf.split(model, k, num_labels=None, pooling=None, layers=None)

`prefix(batch)` takes the tokenizer's output (a dict of `input_ids`, `attention_mask` and, where
the model has them, `token_type_ids`, each [B, L]) and returns {"hidden": [B, L, H],
"mask": [B, L] int64}: the hidden states entering layer k. `head(features)` takes that dict and
returns the pooled embedding [B, H] (num_labels=None; pooling "mean" over the mask, or "cls",
the first token; a sentence-transformers model's own Pooling and Normalize modules) or the
logits of a new Linear(H, num_labels) over it. In eval mode
`head(prefix(x))` equals the pooling of `model(**x).last_hidden_state` bit for bit: the prefix
is the model's own forward stopped at layer k, and the head calls layers k.. with the very
arguments the model gives them (the attention mask made by the model's own code from the 2-D
mask, whatever the transformers version and attention implementation).

The prefix owns the embeddings and layers 0..k-1 (its state_dict: the cache's identity); the
head owns layers k.. (the model's own modules: training the head trains them in place, so
`model.save_pretrained` saves the fine-tuned layers) and the new classifier. Needs no import of
transformers: it works on the model it is given.
"""
import collections.abc
import operator

import torch
import torch.nn as nn

from . import _hf_layers, _tensors
from .dataset import collate

_POOLINGS = ("mean", "cls")


def _inputs(batch):
    """The tokenizer's output as keyword arguments of the model's forward."""
    if not hasattr(batch, "keys") or "input_ids" not in batch or "attention_mask" not in batch:
        raise ValueError("the prefix takes the tokenizer's output: a dict with input_ids and "
                         "attention_mask (return_tensors=\"pt\")")
    return dict(batch)


def _pool(hidden, mask, pooling):
    """[B, H] of hidden [B, L, H] over mask [B, L]: the masked mean (sentence-transformers') or
    the first token."""
    if pooling == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


class Prefix(nn.Module):
    """The embeddings and layers 0..k-1 of a transformers encoder (recycle.hf.split)."""

    def __init__(self, base, family, layers, k):
        super().__init__()
        object.__setattr__(self, "_base", base)  # run, not owned: its later layers are the head's
        object.__setattr__(self, "_stop", layers[k] if k < len(layers) else None)
        object.__setattr__(self, "_cut", (family, layers))  # for for_export
        self.k = k
        # What the prefix computes, owned so that its state_dict is the cache's identity: every
        # part of the base but the layers' container, the pooler and what runs after the layers
        # (unless the prefix is the whole encoder); the container's other modules, whose outputs
        # every layer shares (MPNet's position bias, DeBERTa's relative embeddings: frozen
        # here); and layers 0..k-1.
        whole = k == len(layers)
        holder = _hf_layers.container(base, family)
        skip = {"pooler"} | (set() if whole else set(family.after))
        self.parts = nn.ModuleDict({name: m for name, m in base.named_children()
                                    if m is not holder and m is not layers and name not in skip})
        conv = _hf_layers.deberta_conv(base, family)
        self.shared = nn.ModuleDict({name: m for name, m in holder.named_children()
                                     if m is not layers and (m is not conv or k >= 1)}
                                    if holder is not base else {})
        self.layers = nn.ModuleList(layers[:k])

    def forward(self, batch):
        inputs = _inputs(batch)
        if self._stop is None:  # the whole encoder
            hidden = self._base(**inputs).last_hidden_state
        else:
            handle = _hf_layers.stop_at(self._stop)
            try:
                self._base(**inputs)
                raise RuntimeError("recycle.hf: the model's forward did not reach layer "
                                   f"{self.k}")
            except _hf_layers.Stop as stop:
                hidden = stop.args[0] if stop.args else stop.kwargs["hidden_states"]
            finally:
                handle.remove()
        return {"hidden": hidden, "mask": inputs["attention_mask"].to(torch.int64)}

    def for_export(self):
        """This prefix as a module of tensors that torch.export traces (recycle.export takes the
        prefix itself and calls this): forward(input_ids, attention_mask) -> (hidden, mask), the
        model's own forward with its layers cut to the first k (_hf_layers.cut_at) instead of
        stopped by a hook. token_type_ids are left out (the model's default: zeros, what a
        tokenizer gives one text)."""
        return _TokensPrefix(self)


class _TokensPrefix(nn.Module):
    """Prefix.for_export's module; its state_dict is the prefix's (under "prefix.")."""

    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix

    def forward(self, input_ids, attention_mask):
        prefix = self.prefix
        family, layers = prefix._cut
        with _hf_layers.cut_at(prefix._base, family, layers, prefix.k):
            out = prefix._base(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state, attention_mask.to(torch.int64)


class Head(nn.Module):
    """Layers k.. of a transformers encoder, what runs after them (ModernBERT's final norm), a
    pooling and an optional new classifier (recycle.hf.split). Each layer gets the arguments the
    model gives it (_hf_layers.LayerArguments). The hidden states it is given (float32 from the
    cache) are cast to its parameters' dtype (an fp16/bf16 model's), the pooling to the
    classifier's."""

    def __init__(self, base, family, layers, k, num_labels, pooling, sentence=(), width=None):
        super().__init__()
        object.__setattr__(self, "_base", base)  # run for its layers' arguments, not owned
        object.__setattr__(self, "_arguments", _hf_layers.LayerArguments(base, layers))
        self.k, self.pooling = k, pooling
        self.layers = nn.ModuleList(layers[k:])
        # DeBERTa-v2's ConvLayer after layer 0, when layer 0 is the head's.
        conv = _hf_layers.deberta_conv(base, family)
        self.conv = conv if k == 0 else None
        self.after = nn.ModuleList([getattr(base, name) for name in family.after]
                                   if k < len(layers) else [])
        # A SentenceTransformer's own modules after its transformer (Pooling, Normalize, Dense):
        # they pool, as model.encode does.
        self.sentence = nn.ModuleList(sentence)
        hidden = width or (base.config.hidden_size if hasattr(base.config, "hidden_size")
                           else base.config.dim)
        self.classifier = nn.Linear(hidden, num_labels) if num_labels else None

    def forward(self, features):
        if not hasattr(features, "keys") or "hidden" not in features or "mask" not in features:
            raise ValueError("the head takes the prefix's output: a dict with hidden and mask")
        hidden, mask = features["hidden"], features["mask"]
        weight = next(self.parameters(), None)
        if weight is not None and hidden.is_floating_point():
            hidden = hidden.to(weight.dtype)
        if len(self.layers):
            every = self._arguments(mask)[self.k:]
            for i, (layer, (args, kwargs)) in enumerate(zip(self.layers, every)):
                args, kwargs = _tensors.on_device(args, hidden.device), _tensors.on_device(kwargs, hidden.device)
                if args:
                    out = layer(hidden, *args[1:], **kwargs)
                else:
                    out = layer(**dict(kwargs, hidden_states=hidden))
                out = out[0] if isinstance(out, tuple) else out  # 4.x: a tuple; 5.x: a tensor
                if i == 0 and self.conv is not None:
                    out = self.conv(hidden, out, mask.to(hidden.device))
                hidden = out
            for module in self.after:
                hidden = module(hidden)
        if len(self.sentence):
            features = {"token_embeddings": hidden, "attention_mask": mask.to(hidden.device)}
            for module in self.sentence:
                features = module(features)
            pooled = features["sentence_embedding"]
        else:
            pooled = _pool(hidden, mask.to(hidden.device), self.pooling)
        if self.classifier is None:
            return pooled
        return self.classifier(pooled.to(self.classifier.weight.dtype))


def data_collator(items):
    """transformers' Trainer's data_collator for the prefix's records: the batch as the keyword
    arguments of a head's forward, {"hidden", "mask", "labels"} (records padded to the batch's
    longest, as recycle.collate pads them). Takes a CachedDataset's items ((features, label)
    pairs), or dicts of hidden and mask, each with a label ("labels" or "label") or none without
    one (a batch without "labels"); ValueError in one line for anything else."""
    items = list(items)
    if not items:
        raise ValueError("recycle.hf.data_collator got no items: give it a batch of at least one")
    if all(isinstance(it, collections.abc.Mapping) for it in items):
        return _collated_dicts(items)
    if not all(isinstance(it, (tuple, list)) and len(it) == 2 for it in items):
        bad = next(it for it in items if not (isinstance(it, (tuple, list)) and len(it) == 2))
        what = f"a {type(bad).__name__} of {len(bad)}" if isinstance(bad, (tuple, list)) \
            else f"a {type(bad).__name__}"
        raise ValueError(f"recycle.hf.data_collator takes a CachedDataset's (features, label) "
                         f"pairs or dicts of hidden, mask and labels, not {what}")
    features, labels = collate(items)
    if not isinstance(features, dict):
        raise ValueError("recycle.hf.data_collator takes records of several named tensors "
                         "(the prefix's hidden and mask)")
    return dict(features, labels=labels)


def _collated_dicts(items):
    """data_collator's batch of dict items, each with hidden and mask and all or none with a
    label ("labels" or "label")."""
    names = set(items[0])
    label = next((n for n in ("labels", "label") if n in names), None)
    for i, it in enumerate(items):
        if set(it) != names:
            raise ValueError(f"recycle.hf.data_collator: item {i} has {sorted(map(str, it))}, item "
                             f"0 {sorted(map(str, names))}: give every item the same keys")
    if "hidden" not in names or "mask" not in names:
        raise ValueError("recycle.hf.data_collator takes dicts of the prefix's hidden and mask "
                         f"(and labels), not of {', '.join(sorted(map(str, names)))}")
    batch = {n: _tensors.stacked([torch.as_tensor(it[n]) for it in items]) for n in items[0]
             if n != label}
    if label is not None:
        batch["labels"] = torch.as_tensor([int(it[label]) for it in items], dtype=torch.int64)
    return batch


def _integer(value):
    """`value` as an int when it is an integer of another type (numpy's, a 0-d tensor's), else
    as it is."""
    if isinstance(value, (bool, int)) or not hasattr(value, "__index__"):
        return value
    try:
        return operator.index(value)
    except TypeError:
        return value


def split(model, k, num_labels=None, pooling=None, layers=None):
    """(prefix, head) of a transformers encoder cut before layer k (0: the embeddings alone are
    the prefix; the number of layers: the whole encoder). `pooling`: "mean" (None) or "cls"; a
    sentence-transformers model pools with its own modules (its Pooling, Normalize, Dense), so
    that the head's embedding is model.encode's. `layers`: for an encoder of a family split does
    not know, the attribute path of its list of layers (e.g. "encoder.layer"); the split is then
    checked on a probe batch and refused in one line where head(prefix(x)) is not the model's
    own output. See the module's docstring."""
    model, sentence, width = _hf_layers.sentence_transformer(model, pooling)
    pooling = "mean" if pooling is None else pooling
    base, family, layer_list = _hf_layers.base_and_layers(model, layers)
    k, num_labels = _integer(k), _integer(num_labels)  # numpy's and torch's integers too
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(layer_list):
        raise ValueError(f"k must be a layer count from 0 to {len(layer_list)}, not {k!r}")
    if pooling not in _POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(_POOLINGS)}, not {pooling!r}")
    if num_labels is not None and (isinstance(num_labels, bool) or not isinstance(num_labels, int)
                                   or num_labels < 1):
        raise ValueError(f"num_labels must be None or a positive int, not {num_labels!r}")
    prefix = Prefix(base, family, layer_list, k)
    head = Head(base, family, layer_list, k, num_labels, pooling, sentence, width)
    if layers is not None and family is not _hf_layers.FAMILIES.get(base.config.model_type):
        # A SentenceTransformer's transformer is checked as it is (mean pooling): what its own
        # modules do after it is the same on both sides.
        plain = Head(base, family, layer_list, k, None, "mean") if sentence else head
        _check_on_a_probe(base, prefix, plain, layers, "mean" if sentence else pooling)
    return prefix, head


def _check_on_a_probe(base, prefix, head, layers, pooling):
    """ValueError in one line unless head(prefix(x)) (without a classifier) equals the pooling of
    the model's own output on a probe batch (random ids, one row padded), in eval mode."""
    vocab = getattr(base.config, "vocab_size", 2) or 2
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, max(2, vocab), (2, 6), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    device = next(base.parameters()).device
    x = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
    classifier, head.classifier = head.classifier, None
    modes = [m.training for m in (base, prefix, head)]
    base.eval(), prefix.eval(), head.eval()
    try:
        with torch.no_grad():
            want = _pool(base(**x).last_hidden_state, x["attention_mask"], pooling)
            got = head(prefix(x))
    except Exception as e:  # noqa: BLE001 -- the model's own error, named in the refusal
        got, want = None, e
    finally:
        head.classifier = classifier
        for m, mode in zip((base, prefix, head), modes):
            m.train(mode)
    if got is None:
        raise ValueError(f"recycle.hf.split: {type(base).__name__} cut at layers={layers!r} does "
                         f"not run ({type(want).__name__}: {want}); it needs a family of its own")
    if not torch.equal(got, want):
        raise ValueError(f"recycle.hf.split: {type(base).__name__} cut at layers={layers!r} is not "
                         f"exact (head(prefix(x)) differs from the model's output by up to "
                         f"{(got - want).abs().max().item():.3g} on a probe batch): the model "
                         "does more around its layers than passing them on; it needs a family "
                         "of its own")


from ._hf_profile import profile  # noqa: E402  (recycle.hf.profile; it uses split's helpers)
