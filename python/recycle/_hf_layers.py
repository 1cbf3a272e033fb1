"""The layers of a transformers encoder, for recycle.hf.split: where each family keeps its list of
layers and what runs after it, and the arguments the model passes each layer, taken from the
model's own forward without running any layer.

Families: model_type -> Family(layers, after). `layers` is the attribute path of the list of
layers in the base model; `after`, the base model's modules that the forward runs on the last
layer's output (ModernBERT's final_norm): they go with the last layer (the head's, or the
prefix's when the prefix is the whole encoder). Modules of the layers' container other than the
list (MPNet's relative_attention_bias, DeBERTa's rel_embeddings and LayerNorm) compute arguments
that every layer shares: they are the prefix's (frozen; the head's layers get their outputs).
DeBERTa-v2's ConvLayer runs on layer 0's input and output: with the prefix when k >= 1, in the
head when k = 0."""
import collections
import contextlib
import threading

import torch
import torch.nn as nn

Family = collections.namedtuple("Family", "layers after")
_PATCHING = threading.RLock()  # LayerArguments swaps layers' forward: one at a time
_NONE = object()

FAMILIES = {
    "bert": Family("encoder.layer", ()),
    "roberta": Family("encoder.layer", ()),
    "xlm-roberta": Family("encoder.layer", ()),
    "electra": Family("encoder.layer", ()),
    "distilbert": Family("transformer.layer", ()),
    "mpnet": Family("encoder.layer", ()),
    "deberta-v2": Family("encoder.layer", ()),
    "modernbert": Family("layers", ("final_norm",)),
}


class Stop(Exception):
    """Raised by a hook on a layer: the model's forward ends there, the layer's arguments kept."""

    def __init__(self, args, kwargs):
        super().__init__("recycle.hf: stopped at the split")
        self.args, self.kwargs = args, kwargs


def stop_at(layer):
    """A forward pre-hook on `layer` that stops the model's forward with the layer's arguments."""
    def hook(module, args, kwargs):
        raise Stop(args, kwargs)
    return layer.register_forward_pre_hook(hook, with_kwargs=True)


@contextlib.contextmanager
def cut_at(base, family, layers, k):
    """While it is open, the base model's forward runs layers 0..k-1 only and returns their output
    as last_hidden_state: its list of layers is cut to the first k, and its pooler and what runs
    after the layers (family.after; kept when k is every layer) are identities. The model's own
    forward, with no hook, so that torch.export can trace it (recycle.export of a Prefix)."""
    holder_path, _, name = family.layers.rpartition(".")
    holder = _attribute(base, holder_path) if holder_path else base
    swaps = [] if k == len(layers) else [(holder, name, nn.ModuleList(list(layers)[:k]))]
    after = ("pooler",) + (tuple(family.after) if k < len(layers) else ())
    swaps += [(base, n, nn.Identity()) for n in after
              if isinstance(getattr(base, n, None), nn.Module)]
    with _PATCHING:
        kept = [(owner, n, getattr(owner, n)) for owner, n, _ in swaps]
        try:
            for owner, n, module in swaps:
                setattr(owner, n, module)
            yield
        finally:
            for owner, n, module in kept:
                setattr(owner, n, module)


def _attribute(root, path):
    for name in path.split("."):
        root = getattr(root, name, None)
    return root


def base_and_layers(model, layers=None):
    """(base model, its family or None, its list of layers) of `model` (its base_model for a model
    with a task head). `layers`: the attribute path of the list in the base model, for a family
    not in FAMILIES. ValueError in one line naming what to do."""
    if not isinstance(model, nn.Module) or not hasattr(model, "config"):
        raise ValueError(f"recycle.hf.split takes a transformers model, not {type(model).__name__}")
    base = getattr(model, "base_model", model)
    kind = getattr(model.config, "model_type", None)
    family = FAMILIES.get(kind)
    if layers is None and family is None:
        raise ValueError(f"recycle.hf.split does not know {type(model).__name__} (model_type "
                         f"{kind!r}); it knows {', '.join(sorted(FAMILIES))}; for another encoder "
                         "name its list of layers, e.g. layers=\"encoder.layer\" (checked for "
                         "exactness when the split is made)")
    if layers is not None:
        if not isinstance(layers, str) or not layers:
            raise ValueError(f"layers must be the attribute path of the model's list of layers, "
                             f"e.g. \"encoder.layer\", not {layers!r}")
        family = family if family and family.layers == layers else Family(layers, ())
    found = _attribute(base, family.layers)
    if not isinstance(found, nn.ModuleList) or not len(found):
        raise ValueError(f"recycle.hf.split: {type(base).__name__} has no {family.layers} "
                         "list of layers")
    return base, family, found


def container(base, family):
    """The module that holds the list of layers (the base itself for ModernBERT's `layers`)."""
    path = family.layers.rsplit(".", 1)
    return _attribute(base, path[0]) if len(path) == 2 else base


def deberta_conv(base, family):
    """DeBERTa-v2's ConvLayer on layer 0's input and output, or None."""
    return getattr(container(base, family), "conv", None) if family.layers == "encoder.layer" \
        and getattr(base.config, "model_type", None) == "deberta-v2" else None


def _passthrough(shape):
    """A layer's forward that returns its input hidden states in the structure of the real
    layer's output (`shape`: None for a tensor, else the length of the tuple)."""
    def forward(*args, **kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        return hidden if shape is None else (hidden,) + (None,) * (shape - 1)
    return forward


def _run_stopped(base, layer, mask, device):
    """Runs the base on zero ids of `mask` until `layer`: (args, kwargs) given to `layer`."""
    handle = stop_at(layer)
    try:
        base(input_ids=torch.zeros_like(mask, device=device), attention_mask=mask.to(device))
        raise RuntimeError("recycle.hf: the model's forward did not reach its layer")
    except Stop as stop:
        return stop.args, stop.kwargs
    finally:
        handle.remove()


class LayerArguments:
    """The arguments the model gives each of its layers for a batch's 2-D mask, taken from one run
    of its forward on zero ids in which every layer passes its input through unchanged (the
    embeddings and the masks and position encodings the model builds run; no layer does). A
    layer's arguments do not depend on the hidden states, only on the mask and its length."""

    def __init__(self, base, layers):
        self.base, self.layers = base, layers
        self.shape, self.learnt = None, False  # learnt at the first call (_output_shape)

    def _output_shape(self):
        """The structure of a layer's output (None: a tensor; else the length of its tuple, as in
        transformers 4.x and DeBERTa), from layer 0 run once on a one-token probe."""
        if not self.learnt:  # (a flag, not a sentinel object: a deepcopy of a head keeps it)
            device = next(self.base.parameters()).device
            probe = torch.ones(1, 1, dtype=torch.int64)
            with torch.no_grad():
                args, kwargs = _run_stopped(self.base, self.layers[0], probe, device)
                out = self.layers[0](*args, **kwargs)
            self.shape = len(out) if isinstance(out, tuple) else None
            self.learnt = True
        return self.shape

    def __call__(self, mask):
        """[(args, kwargs)] of every layer for `mask`, under no_grad. For the moment it runs, the
        layers' forward is the recorder's (restored as it was after, a wrapper of accelerate's
        too): nothing else may run the same model in another thread meanwhile; calls of the
        package's heads take turns (one lock)."""
        device = next(self.base.parameters()).device
        shape = self._output_shape()
        seen = []

        def recorder(last):
            def forward(*args, **kwargs):
                seen.append((args, kwargs))
                if last:
                    raise Stop(args, kwargs)
                return _passthrough(shape)(*args, **kwargs)
            return forward

        with _PATCHING:
            own = [layer.__dict__.get("forward", _NONE) for layer in self.layers]
            try:
                for i, layer in enumerate(self.layers):
                    layer.forward = recorder(i == len(self.layers) - 1)
                with torch.no_grad():
                    self.base(input_ids=torch.zeros_like(mask, device=device),
                              attention_mask=mask.to(device))
                raise RuntimeError("recycle.hf: the model's forward did not reach its last layer")
            except Stop:
                return seen
            finally:
                for layer, forward in zip(self.layers, own):
                    if forward is _NONE:
                        layer.__dict__.pop("forward", None)  # the class's forward again
                    else:
                        layer.forward = forward


def sentence_transformer(model, pooling):
    """(its transformers model, its modules after the transformer, their output's width) of a
    sentence-transformers model (an nn.Sequential whose first module holds `auto_model`), or
    (model, (), None) for any other."""
    if not (isinstance(model, nn.Sequential) and len(model) and hasattr(model[0], "auto_model")):
        return model, (), None
    if pooling is not None:
        raise ValueError(f"recycle.hf.split: a SentenceTransformer pools with its own modules "
                         f"({', '.join(type(m).__name__ for m in list(model)[1:])}), as encode "
                         f"does; leave pooling unset, not {pooling!r}")
    # sentence-transformers 6 renamed get_sentence_embedding_dimension (now deprecated).
    dimension = getattr(model, "get_embedding_dimension", None) or \
        getattr(model, "get_sentence_embedding_dimension", lambda: None)
    width = dimension()
    return model[0].auto_model, tuple(model)[1:], width
