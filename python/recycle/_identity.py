"""A cache's identity as recycle.build gives it: the prefix's model name and the fingerprint of
its state_dict, and the preprocessing (a tokenizer's identity: what it makes of probe texts,
or its state)."""
import functools
import hashlib
import json

import torch

from . import _inputs, _native


def eval_mode(prefix):
    """Puts an nn.Module prefix in eval mode. Returns (device, restore): the device its inputs go
    to (its first parameter's or buffer's; None for a callable or a module with neither), and a
    function that gives every submodule back its own mode (a model in train mode may hold
    frozen batch norms in eval mode)."""
    if not isinstance(prefix, torch.nn.Module):
        return None, lambda: None
    params = list(prefix.parameters()) or list(prefix.buffers())
    modes = [(m, m.training) for m in prefix.modules()]
    prefix.eval()

    def restore():
        for m, training in modes:
            m.training = training

    return (params[0].device if params else None), restore


def original(prefix):
    """The module a torch.compile'd prefix wraps (its _orig_mod: the same weights and the same
    outputs, so the same cache), else prefix itself."""
    orig = getattr(prefix, "_orig_mod", None)
    if isinstance(prefix, torch.nn.Module) and isinstance(orig, torch.nn.Module):
        return orig
    return prefix


def identity_of(prefix, model_id):
    """(model, fingerprint) of the cache's identity: the name of the prefix's class (of the
    module torch.compile wrapped) unless model_id names it, and the hash of its state_dict."""
    if model_id is not None and (not isinstance(model_id, str) or not model_id):
        raise ValueError("model_id must be a non-empty string")
    prefix = original(prefix)
    state = None
    if isinstance(prefix, torch.nn.Module):
        state = prefix.state_dict()
    elif hasattr(prefix, "state_dict") and callable(prefix.state_dict):
        state = prefix.state_dict()
    if state is None and model_id is None:
        raise ValueError("the prefix has no state_dict to fingerprint: name it with model_id")
    if model_id is None:
        kind = type(prefix)
        model_id = f"{kind.__module__}.{kind.__qualname__}"
    names = list(state.keys()) if state is not None else []
    tensors = [t if isinstance(t, torch.Tensor) else torch.as_tensor(t) for t in
               (state.values() if state is not None else [])]
    for name, t in zip(names, tensors):
        if t.device.type == "meta":
            raise ValueError(f"the prefix's '{name}' is on the meta device (it holds no values): "
                             "load the prefix's weights before build (load_state_dict(..., "
                             "assign=True), or to_empty(device=...) and then load them)")
    fingerprint = _native.tensors_fingerprint(names, tensors) if state is not None else "none"
    return "python:" + model_id, fingerprint


# Texts a tokenizer is probed with: what it makes of them (ids, masks, where it cuts a long text)


# is the preprocessing a text cache's records depend on.


TOKENIZER_PROBE = ["The Quick brown fox, 42 times: naïve café Ünïcode — “quoted” ünd ÆØÅ ß 東京 🙂!",
                    " ".join(f"word{i} w{i % 7}x" for i in range(1500))]


def preprocessing_of(tokenizer):
    """The manifest's preprocessing of a cache whose inputs `tokenizer` tokenizes: "python", and
    with a tokenizer the hash of its output for TOKENIZER_PROBE (as build calls it: _inputs.tokenized),
    so that a cache built with another vocabulary, normalisation or cut (another max_length) is
    refused as stale instead of serving records of other tokens. A tokenizer of its own that
    cannot take those texts (a toy vocabulary) is identified by its state instead
    (tokenizer_state: its vocabulary and settings); ValueError when it has none to take."""
    if tokenizer is None:
        return "python"
    try:
        probe = _inputs.tokenized(tokenizer, TOKENIZER_PROBE)
        names = sorted(n for n, t in probe.items() if isinstance(t, torch.Tensor))
        failure = "it gave no tensors"
    except Exception as e:  # noqa: BLE001: whatever a tokenizer of the user's raises
        names, failure = [], f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if not names:
        state = tokenizer_state(tokenizer)
        if state is None:
            raise ValueError("tokenizer= cannot be identified for the cache: it fails on recycle's "
                             f"probe texts ({failure[:120]}) and has no get_vocab(): give a "
                             "tokenizer that takes any text, or one with get_vocab() (its "
                             "vocabulary)")
        return f"python, tokenizer {hashlib.sha256(state).hexdigest()[:16]}"
    _inputs.right_padded(probe)
    digest = _native.tensors_fingerprint(names, [probe[n] for n in names])
    return f"python, tokenizer {digest[:16]}"


# What a tokenizer's settings may hold that changes its tokens (beside its vocabulary).


TOKENIZER_SETTINGS = ("model_max_length", "max_length", "truncation_side", "do_lower_case",
                       "strip_accents", "add_prefix_space")


def tokenizer_state(tokenizer):
    """A tokenizer's identity taken from its state, as bytes: its class, get_vocab(), its
    settings (the scalars of a transformers tokenizer's init_kwargs but file names, or of
    another's public attributes; TOKENIZER_SETTINGS; padding_side aside: build pads on the
    right), a fast tokenizer's backend (its tokenizer.json, without the padding and truncation a
    call sets), and a functools.partial's arguments. None when it has no get_vocab()."""
    call = tokenizer if isinstance(tokenizer, functools.partial) else None
    owner = call.func if call is not None else tokenizer
    try:
        vocab = owner.get_vocab()
        state = {"class": f"{type(owner).__module__}.{type(owner).__qualname__}",
                 "vocab": sorted((str(k), str(v)) for k, v in dict(vocab).items())}
    except Exception:  # noqa: BLE001: none, or one that fails: no identity to take
        return None
    scalar = (str, int, float, bool, type(None))
    init = getattr(owner, "init_kwargs", None)
    given = init if isinstance(init, dict) else getattr(owner, "__dict__", {})
    settings = {k: v for k, v in given.items() if isinstance(v, scalar) and k != "padding_side"
                and not k.startswith("_") and not k.endswith(("_file", "name_or_path"))}
    for name in TOKENIZER_SETTINGS:
        value = getattr(owner, name, None)
        if isinstance(value, scalar):
            settings[name] = value
    state["settings"] = settings
    backend = getattr(owner, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        saved = json.loads(backend.to_str())
        saved.pop("padding", None)
        saved.pop("truncation", None)
        state["backend"] = saved
    if call is not None:
        state["call"] = [repr(a) for a in call.args] + \
            [f"{k}={v!r}" for k, v in sorted(call.keywords.items())]
    return json.dumps(state, sort_keys=True, default=str).encode()
