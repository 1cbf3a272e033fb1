"""The records a prefix's outputs make (recycle.build, recycle.CachedPrefix): its outputs named
as the record layout names them, the layout of the first batch, each later batch's checked
against it, and records as long as the text (sequences cut to the mask's positions)."""
import json
import os

import torch

from . import _native


EXACT = {torch.int64: "int64", torch.int32: "int32", torch.uint8: "uint8", torch.bool: "bool"}


def named_outputs(out, rows):
    """The prefix's output for a batch of `rows` inputs as [(name, tensor)]: a tensor is
    "activation", a tuple/list's tensors "activation", "tensor1", ... (recycle-build's names), a
    dict's its keys in order. Each must be dense with one row per input."""
    if isinstance(out, torch.Tensor):
        named = [("activation", out)]
    elif isinstance(out, (tuple, list)) and out and all(isinstance(t, torch.Tensor) for t in out):
        named = [("activation" if i == 0 else f"tensor{i}", t) for i, t in enumerate(out)]
    elif isinstance(out, dict) and out and all(isinstance(t, torch.Tensor) for t in out.values()):
        named = [(str(k), t) for k, t in out.items()]
    else:
        raise ValueError("the prefix must return a tensor, or a non-empty tuple/list/dict of "
                         f"tensors, not {type(out).__name__}")
    for name, t in named:
        if t.layout != torch.strided:
            raise ValueError(f"the prefix's output '{name}' is a {t.layout} tensor: records hold "
                             "dense tensors (return t.to_dense())")
        if t.dim() == 0 or t.shape[0] != rows:
            got = "a 0-d tensor" if t.dim() == 0 else f"{t.shape[0]} rows"
            raise ValueError(f"the prefix's output '{name}' is {got} for a batch of {rows} "
                             "inputs: it must have the batch as dimension 0, one row per input")
    return named


def layout_of(named):
    """The record layout a prefix's named outputs make: [(name, dtype name, per-sample shape)]."""
    return [(name, dtype_name(name, t), list(t.shape[1:])) for name, t in named]


def quoted_names(names):
    return ", ".join(f"'{n}'" for n in names)


def arranged(named, layout):
    """A batch's named outputs as the record layout orders them: a dict's tensors taken by name
    (any key order), a tensor's or a tuple's by position (their names are positional). Each must
    have the layout's dtype and per-sample shape; ValueError naming the key otherwise."""
    by_name = dict(named)
    wanted = [name for name, _, _ in layout]
    extra = [n for n, _ in named if n not in set(wanted)]
    missing = [n for n in wanted if n not in by_name]
    if extra or missing:
        what = (f"gave {quoted_names(extra)}, which the records do not hold" if extra
                else f"lacks {quoted_names(missing)}")
        raise ValueError(f"the prefix's output {what}: every batch must give the tensors of the "
                         f"first ({quoted_names(wanted)})")
    tensors = []
    for name, dtype, shape in layout:
        t = by_name[name]
        got_dtype = dtype_name(name, t)
        if got_dtype != dtype:
            raise ValueError(f"the prefix's output '{name}' is {got_dtype} in this batch, the "
                             f"records hold {dtype} (the first batch's)")
        if shape and shape[0] == -1:  # a sequence cut per row: any length in a batch
            fits = t.dim() == len(shape) + 1 and list(t.shape[2:]) == shape[1:]
        else:
            fits = list(t.shape[1:]) == shape
        if not fits:
            raise ValueError(f"the prefix's output '{name}' has shape {list(t.shape[1:])} per "
                             f"sample in this batch, the records hold {shape} (the first batch's)")
        tensors.append(t)
    return tensors


def stored_layout(path, rebuild):
    """The names of the record layout of the cache at `path` (None when there is none, or when it
    will be rebuilt)."""
    if rebuild or not os.path.isdir(path):
        return None
    try:
        manifest = json.loads(_native.inspect(path, False))
    except (RuntimeError, ValueError, OSError):  # not a cache (yet): the writer says what is wrong
        return None
    return [t.get("name") for t in manifest.get("record_layout") or []]


def dtype_name(name, t):
    if t.is_floating_point():
        return "float32"
    if t.dtype in EXACT:
        return EXACT[t.dtype]
    raise ValueError(f"the prefix's output '{name}' is {t.dtype}; records hold floating tensors "
                     "(stored with the codec) or int64, int32, uint8, bool (stored exactly)")


def sequence_cut(named, inputs):
    """Records as long as the text: when the prefix's outputs hold a mask [B, L] (named "mask" or
    "attention_mask"; else the inputs' attention_mask), every output whose dimension 1 has L
    positions is a sequence, stored with the positions the mask keeps only. Returns (named, the
    names of the sequences, each row's length) with the kept positions moved to the front (a
    left-padded batch too), or (named, set(), None) when there is no mask."""
    by_name = dict(named)
    mask = next((by_name[n] for n in ("mask", "attention_mask") if n in by_name), None)
    if mask is None and isinstance(inputs, dict):
        mask = inputs.get("attention_mask")
    if mask is None or mask.dim() != 2:
        return named, set(), None
    keep = mask.to(torch.bool)
    lengths = keep.sum(1)
    if bool((lengths == 0).any()):
        raise ValueError("a sample's mask keeps no position: records hold at least one")
    width = mask.shape[1]
    sequences = {n for n, t in named if t.dim() >= 2 and t.shape[1] == width}
    if not bool((keep == (torch.arange(width)[None, :].to(keep.device) < lengths[:, None])).all()):
        order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)  # kept ones first
        named = [(n, t.gather(1, order.view(*order.shape, *([1] * (t.dim() - 2))).expand_as(t))
                  if n in sequences else t) for n, t in named]
    return named, sequences, [int(n) for n in lengths]


def first_rows(out, k):
    """The first k rows of a prefix's output (a tensor, a tuple/list or a dict of tensors)."""
    if isinstance(out, torch.Tensor):
        return out[:k]
    if isinstance(out, dict):
        return {name: t[:k] for name, t in out.items()}
    return type(out)(t[:k] for t in out)
