"""recycle.build: a cache filled by your own prefix, stored by the engine."""
import collections.abc
import functools
import hashlib
import json
import math
import os
import socket
import sys
import time

import torch

from . import _native
from ._options import filled
from .cache import _path
from .dataset import _stacked

_EXACT = {torch.int64: "int64", torch.int32: "int32", torch.uint8: "uint8", torch.bool: "bool"}


def _outputs(out, rows):
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


def _layout_of(named):
    """The record layout a prefix's named outputs make: [(name, dtype name, per-sample shape)]."""
    return [(name, _dtype_name(name, t), list(t.shape[1:])) for name, t in named]


def _names(names):
    return ", ".join(f"'{n}'" for n in names)


def _arranged(named, layout):
    """A batch's named outputs as the record layout orders them: a dict's tensors taken by name
    (any key order), a tensor's or a tuple's by position (their names are positional). Each must
    have the layout's dtype and per-sample shape; ValueError naming the key otherwise."""
    by_name = dict(named)
    wanted = [name for name, _, _ in layout]
    extra = [n for n, _ in named if n not in set(wanted)]
    missing = [n for n in wanted if n not in by_name]
    if extra or missing:
        what = (f"gave {_names(extra)}, which the records do not hold" if extra
                else f"lacks {_names(missing)}")
        raise ValueError(f"the prefix's output {what}: every batch must give the tensors of the "
                         f"first ({_names(wanted)})")
    tensors = []
    for name, dtype, shape in layout:
        t = by_name[name]
        got_dtype = _dtype_name(name, t)
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


def _stored_layout(path, rebuild):
    """The names of the record layout of the cache at `path` (None when there is none, or when it
    will be rebuilt)."""
    if rebuild or not os.path.isdir(path):
        return None
    try:
        manifest = json.loads(_native.inspect(path, False))
    except (RuntimeError, ValueError, OSError):  # not a cache (yet): the writer says what is wrong
        return None
    return [t.get("name") for t in manifest.get("record_layout") or []]


def _eval_mode(prefix):
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


def _dtype_name(name, t):
    if t.is_floating_point():
        return "float32"
    if t.dtype in _EXACT:
        return _EXACT[t.dtype]
    raise ValueError(f"the prefix's output '{name}' is {t.dtype}; records hold floating tensors "
                     "(stored with the codec) or int64, int32, uint8, bool (stored exactly)")


def _split_batch(batch, where, start=0):
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError(f"{where} must give (input, label) pairs, not {type(batch).__name__}")
    if len(batch) > 2:  # an index or a weight would be dropped without a word
        raise ValueError(f"{where} gives {len(batch)} items per sample; build stores (input, label) "
                         "pairs: wrap the dataset so that it gives (input, label) only")
    inputs, labels = batch[0], batch[1]
    if not isinstance(inputs, torch.Tensor):
        inputs = _samples_of(inputs, where, start)
    if _holds_strings(labels):
        raise ValueError(f"{where}: labels must be integers (class ids), not strings: map each "
                         "name to its index and give the names as classes=")
    try:
        labels = torch.as_tensor(labels)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"{where}: labels must be integers, not {type(labels).__name__} "
                         f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"{where}: labels must be integers, not {labels.dtype}")
    return inputs, labels.to(torch.int64).reshape(-1)


def _named_sample(x, where):
    """One sample's input of named tensors as {name: tensor}: a dict's items (lists of ints taken
    as tensors), a tuple's by position ("0", "1", ...); a leading dimension of 1 on every tensor
    (a tokenizer's return_tensors="pt" for one text) dropped."""
    items = x.items() if isinstance(x, collections.abc.Mapping) else enumerate(x)
    named = {}
    for name, value in items:
        try:
            t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{where}: input '{name}' must be a tensor (or a list of numbers), "
                             f"not {type(value).__name__}") from None
        named[str(name)] = t.detach()
    if not named:
        raise ValueError(f"{where}: an input of named tensors is empty")
    if all(t.dim() >= 2 and t.shape[0] == 1 for t in named.values()):
        named = {name: t[0] for name, t in named.items()}
    return named


class _Texts(list):
    """A batch of texts (one string a sample)."""


class _Named(list):
    """A batch of samples of named tensors ({name: tensor} each); `as_tuple` when the samples
    were tuples (the prefix then gets a tuple)."""
    as_tuple = False


def _kind(x):
    """The kind of a sample's input, which every sample of a build shares: "text", "tensor",
    ("dict", its names sorted) or ("tuple", its length); None for anything else (None too)."""
    if isinstance(x, str):
        return "text"
    if isinstance(x, torch.Tensor):
        return "tensor"
    if isinstance(x, collections.abc.Mapping):
        return ("dict", tuple(sorted(str(k) for k in x)))
    if isinstance(x, (tuple, list)):
        return ("tuple", len(x))
    return None


def _described(kind):
    if kind in ("text", "tensor"):
        return f"a {kind}"
    return f"a dict of {_names(kind[1])}" if kind[0] == "dict" else f"a tuple of {kind[1]} tensors"


def _unlike(where, i, kind, j, first, x=None):
    """The refusal of sample i's input (`x`, of `kind`) in a batch (or build) whose sample j's
    input is of kind `first`."""
    if kind is None:
        what = "None" if x is None else f"of type {type(x).__name__}"
        return (f"{where}: sample {i}'s input is {what}: inputs must be tensors, texts (with "
                "tokenizer=), or dicts/tuples of tensors"
                + (" (drop the samples without one)" if x is None else ""))
    if isinstance(kind, tuple) and isinstance(first, tuple) and kind[0] == first[0]:
        # padded into one batch by the first's names: another's would be dropped or missing
        return (f"{where}: sample {i}'s input is {_described(kind)}, sample {j}'s "
                f"{_described(first)}: every sample must give the same named tensors: give "
                "each sample the same keys")
    return (f"{where}: sample {i}'s input is {_described(kind)}, sample {j}'s {_described(first)}: "
            "one cache holds one kind of input: build each kind into its own cache")


def _samples_of(inputs, where, start=0):
    """A batch's inputs that are not one tensor: texts (a list of strings) or samples of named
    tensors (a list of dicts or tuples of tensors, or a DataLoader's collated dict of batch
    tensors, split into its rows), all of one kind (dicts with the same keys); `start` is the
    position of the first (ValueError naming the first sample that differs from it, is None or
    is a text that is not valid Unicode)."""
    if isinstance(inputs, (str, bytes)):
        inputs = [inputs]
    if isinstance(inputs, collections.abc.Mapping) and inputs and \
            all(isinstance(t, torch.Tensor) and t.dim() >= 1 for t in inputs.values()):
        rows = {len(t) for t in inputs.values()}
        if len(rows) != 1:
            raise ValueError(f"{where}: the inputs' tensors have different batch sizes "
                             f"{sorted(rows)}")
        return _Named([{str(k): t[i] for k, t in inputs.items()} for i in range(rows.pop())])
    if isinstance(inputs, (tuple, list)) and inputs:
        kinds = [_kind(x) for x in inputs]
        odd = next((i for i, k in enumerate(kinds) if k is None or k != kinds[0]), None)
        if odd is not None and (kinds[0] is not None or inputs[0] is None):
            raise ValueError(_unlike(where, start + odd, kinds[odd], start, kinds[0],
                                     inputs[odd]))
        if kinds[0] == "text":
            for i, t in enumerate(inputs):
                try:
                    t.encode("utf-8")
                except UnicodeEncodeError as e:  # the engine keys UTF-8 bytes: it has none
                    raise ValueError(
                        f"{where}: text {start + i} is not valid Unicode (a lone surrogate at "
                        f"character {e.start}): clean it first, e.g. "
                        "text.encode(\"utf-8\", \"replace\").decode()") from None
            return _Texts(inputs)
        if odd is None and kinds[0] != "tensor":
            samples = _Named(_named_sample(x, where) for x in inputs)
            samples.as_tuple = kinds[0][0] == "tuple"
            return samples
    raise ValueError(f"{where}: inputs must be tensors, texts (with tokenizer=), or dicts/tuples "
                     f"of tensors, not {type(inputs).__name__}")


def _padded(samples, as_tuple, pad_values):
    """Samples of named tensors as one batch: each name's tensors stacked, those of dimension 1
    or more padded at the end of their first dimension to the longest (with pad_values[name], else
    0): a dict of tensors, or a tuple in the names' order (as_tuple)."""
    batch = {}
    for name in samples[0]:
        ts = [s[name] for s in samples]
        if any(t.dim() == 0 for t in ts):
            batch[name] = torch.stack(ts)
            continue
        longest = max(t.shape[0] for t in ts)
        out = ts[0].new_full((len(ts), longest, *ts[0].shape[1:]), pad_values.get(name, 0))
        for i, t in enumerate(ts):
            out[i, :t.shape[0]] = t
        batch[name] = out
    return tuple(batch.values()) if as_tuple else batch


def _prefix_input(inputs, rows, tokenizer):
    """What the prefix takes for rows `rows` (a list of ints) of a batch: the tensor's rows, the
    tokenizer's output for the texts, or the named tensors padded into one batch (input_ids
    with the tokenizer's pad_token_id when it has one, else 0)."""
    if isinstance(inputs, torch.Tensor):
        return inputs[torch.tensor(rows, dtype=torch.int64, device=inputs.device)]
    if isinstance(inputs, _Texts):
        if tokenizer is None:
            raise ValueError("data: inputs are texts: pass tokenizer= (a transformers "
                             "tokenizer): the texts are keyed as they are and tokenized for "
                             "the prefix")
        return _right_padded(_tokenized(tokenizer, [inputs[r] for r in rows]))
    pad = getattr(tokenizer, "pad_token_id", None)
    return _padded([inputs[r] for r in rows], inputs.as_tuple,
                   {} if pad is None else {"input_ids": pad})


def _tokenized(tokenizer, texts):
    """The tokenizer's output for `texts` as build computes them: padding=True, truncation=True,
    return_tensors="pt", padded on the right. A tokenizer with padding_side "left" is set to
    "right" for the call (and set back): padded on the left, a text's positions would shift with
    the longest text of its chunk, and its record depend on the texts beside it."""
    owner = tokenizer.func if isinstance(tokenizer, functools.partial) else tokenizer
    side = getattr(owner, "padding_side", None)
    if side == "left":
        owner.padding_side = "right"
    try:
        out = dict(tokenizer(texts, padding=True, truncation=True, return_tensors="pt"))
    finally:
        if side == "left":
            owner.padding_side = side
    return out


def _right_padded(out):
    """A tokenizer's output `out` (_tokenized's), ValueError when its mask shows padding on the
    left all the same."""
    mask = out.get("attention_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.shape[1] > 1 and \
            bool((mask[:, 1:] > mask[:, :-1]).any()):
        raise ValueError("tokenizer= padded texts on the left: a text's record would depend "
                         "on the texts of its chunk: give a tokenizer that pads on the right "
                         "(padding_side=\"right\")")
    return out


def _sequence_cut(named, inputs):
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


def _holds_strings(items):
    """Whether `items` is a string or a (nested) tuple/list whose first item is one (a batch of
    text as DataLoader collates it)."""
    while isinstance(items, (tuple, list)) and items:
        items = items[0]
    return isinstance(items, (str, bytes))


def _split_batch_checked(batch, start, kinds):
    """A batch's inputs and labels, checked; `start` is the position of its first sample.
    `kinds` is a dict the caller keeps for one pass over the data: the first batch's kind of
    input is noted in it, a later batch of another kind refused (a cache keys one kind)."""
    inputs, labels = _split_batch(batch, "data", start)
    if len(inputs) != labels.shape[0]:
        raise ValueError(f"data: {len(inputs)} inputs with {labels.shape[0]} labels")
    kind = "tensor" if isinstance(inputs, torch.Tensor) else "text" if isinstance(inputs, _Texts) \
        else ("tuple", len(inputs[0])) if inputs.as_tuple else ("dict", tuple(sorted(inputs[0])))
    kinds.setdefault("first", (kind, start))
    if kind != kinds["first"][0]:
        raise ValueError(_unlike("data", start, kind, kinds["first"][1], kinds["first"][0]))
    # A class id is 0 to MAX_CLASS_ID, as recycle-build's sources check it: the cache's class
    # names grow to the largest label (2**40 ran out of memory after minutes).
    outside = (labels < 0) | (labels > _native.MAX_CLASS_ID)
    if bool(outside.any()):
        i = int(outside.nonzero()[0, 0])
        raise ValueError("data: " + _native.class_id_problem(int(labels[i]), start + i))
    if isinstance(inputs, _Named):
        for i, sample in enumerate(inputs):
            for name, t in sample.items():
                if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
                    raise ValueError(f"data: sample {start + i} holds NaN or infinity in "
                                     f"'{name}' (non-finite inputs are refused: the prefix's "
                                     "output for it would be cached)")
        return inputs, labels
    if isinstance(inputs, _Texts):
        return inputs, labels
    if (inputs.is_floating_point() or inputs.is_complex()) and inputs.numel() > 0:
        # A NaN or an infinity would be keyed as it is and cached as the prefix's output for it.
        finite = torch.isfinite(inputs.reshape(inputs.shape[0], -1)).all(dim=1)
        if not bool(finite.all()):
            bad = start + int((~finite).nonzero()[0, 0])
            raise ValueError(f"data: sample {bad} holds NaN or infinity (non-finite inputs are "
                             "refused: the prefix's output for it would be cached)")
    return inputs, labels


def _on_device(x, device):
    """`x` (a tensor, tensors in tuples, lists and dicts, anything else as it is) on `device`
    (None: all as it is)."""
    if device is None:
        return x
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, tuple):
        return tuple(_on_device(v, device) for v in x)
    if isinstance(x, list):
        return [_on_device(v, device) for v in x]
    if isinstance(x, dict):
        return {k: _on_device(v, device) for k, v in x.items()}
    return x


def _collate(items):
    """A DataLoader's batch of (input, label) items: the default collation for tensors; for
    texts and named tensors (which vary in length from sample to sample), or when any input is
    None, (the inputs as a list, the labels): the build checks them, naming the sample."""
    pairs = all(isinstance(it, (tuple, list)) and len(it) == 2 for it in items)
    if pairs and any(it[0] is None or isinstance(it[0], (str, collections.abc.Mapping, tuple, list))
                     for it in items):
        return [it[0] for it in items], [it[1] for it in items]
    return torch.utils.data.default_collate(items)


def _error_of(e):
    """An exception as the message a rank sends the others."""
    return ("error", type(e).__name__, str(e))


def _raise_sent(message):
    """Raises the error of a message of _error_of's, of its kind where the package has it."""
    kind = {"StaleCacheError": _native.StaleCacheError, "ValueError": ValueError,
            "CorruptRecordError": _native.CorruptRecordError}.get(message[1], RuntimeError)
    raise kind(message[2])


def _build_distributed(loader, outputs_of, add_chunk, open_writer, layout, rank, world, bar):
    """The build under an initialised torch.distributed group: every rank reads the same data
    in the same order; rank 0 keys each chunk (add_chunk) and says which rows need the prefix;
    rank r computes rows r, r + world, ... (outputs_of: named outputs and, for records as long
    as the text, their lengths); rank 0 gathers them (each rank's arranged by name as the record
    layout, which open_writer fills on rank 0; sequences padded to the chunk's longest) and
    writes the cache (its only writer, as in recycle-build's distributed build). Each step
    starts with a message from rank 0, so an error anywhere stops every rank at the next step
    with the same message."""
    dist = torch.distributed
    writer = None
    failure = None  # (kind, message) of an error on this rank, sent at the next step

    def send(message):
        box = [message]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def check(message):
        if message[0] == "error":
            _raise_sent(message)
        return message

    start, kinds = 0, {}
    try:
        for batch in loader:
            inputs, labels = _split_batch_checked(batch, start, kinds)
            start += len(inputs)
            message = None
            if rank == 0:
                if failure is not None:
                    message = failure
                else:
                    try:
                        if writer is None:
                            writer = open_writer(inputs)
                        message = ("rows", add_chunk(writer, inputs, labels))
                    except Exception as e:  # every rank stops with it
                        message = _error_of(e)
            message = check(send(message))
            rows = message[1]
            mine = rows[rank::world]
            try:
                part = list(outputs_of(inputs, mine)) if mine else None  # a tuple is an error
            except Exception as e:
                part = _error_of(e)
            parts = [None] * world if rank == 0 else None
            dist.gather_object(part, parts, dst=0)
            if rank == 0 and failure is None:
                try:
                    failed = [p for p in parts if isinstance(p, tuple)]  # _error_of's
                    if failed:
                        failure = failed[0]
                    else:
                        outputs, lengths = [], []
                        if rows:
                            order = torch.cat([torch.arange(len(rows))[r::world] for r in range(world)
                                               if len(rows[r::world])])
                            given = [(_arranged(p[0], layout), p[1]) for p in parts if p is not None]
                            for j in range(len(given[0][0])):
                                # each rank's records padded to its own longest: to the chunk's
                                stacked = _stacked([row for g in given for row in g[0][j]])
                                out = torch.empty_like(stacked)
                                out[order] = stacked
                                outputs.append(out)
                            cut = [length for g in given for length in g[1]]
                            if cut:
                                lengths = [0] * len(cut)
                                for i, o in enumerate(order.tolist()):
                                    lengths[o] = cut[i]
                        writer.write_chunk(outputs, lengths)
                except Exception as e:
                    failure = _error_of(e)
            bar.advance(len(inputs))
        message = None
        if rank == 0:
            try:
                if failure is not None:
                    message = failure
                elif writer is None:
                    message = ("error", "ValueError", "data gave no batches")
                else:
                    message = ("done", json.loads(writer.finish()))
            except Exception as e:
                message = _error_of(e)
        report = check(send(message))[1]
        report["ranks"] = world
        bar.finish()
        return report
    finally:
        if writer is not None:
            writer.close()


def _gathered(value, world):
    """Every rank's `value`, in rank order (all_gather_object; [value] without a group)."""
    if world == 1:
        return [value]
    out = [None] * world
    torch.distributed.all_gather_object(out, value)
    return out


def _exchanged(own, world):
    """Every rank's `own` (a message, or _error_of's), in rank order; raises on every rank when
    any rank failed: this rank's error, else the first rank's that did."""
    every = _gathered(own, world)
    failed = [m for m in every if m[0] == "error"]
    if failed:
        _raise_sent(own if own[0] == "error" else failed[0])
    return every


def _location(path):
    """Where the cache directory `path` is, as a text equal for two paths of one directory on one
    machine (the host, the device and inode of the directory or its nearest existing ancestor,
    and the rest of the path below it), as the engine's cache_location tells it."""
    real, rest = os.path.realpath(os.fspath(path)), []
    while not os.path.exists(real) and os.path.dirname(real) != real:
        rest.insert(0, os.path.basename(real))
        real = os.path.dirname(real)
    st = os.stat(real)
    return f"{socket.gethostname()} {st.st_dev}:{st.st_ino} {'/'.join(rest)}"


def _shard_of_split(loader, keyer_of, rank, world, facts, check=None, where=None):
    """The key pass of a sharded build: keys every sample of `loader` (the whole split, in order)
    as the writer will (keyer_of(inputs): the keyer spec of a batch's inputs), and checks with
    every rank that they key the same samples with the same labels and build the same cache
    (`facts`: the identity and options). Returns (the split's samples, this rank's shard's).
    Every rank raises the same one-line ValueError when they differ or a shard would be empty;
    an error on one rank is raised on every rank. `check` (optional) runs first on every rank
    (rebuild=True's: this rank's cache may be deleted), so that no rank goes on, and deletes,
    when another's fails. `where` is this rank's cache directory (_location): two ranks given one
    are refused."""
    mine = seen = 0
    kinds = {}
    digest = hashlib.sha256()
    try:
        if check is not None:
            check()
        for batch in loader:
            inputs, labels = _split_batch_checked(batch, seen, kinds)
            if isinstance(inputs, _Texts):
                shards, keys = _native.shards_of_texts(keyer_of(inputs), list(inputs), seen, world)
            elif isinstance(inputs, _Named):
                shards, keys = _native.shards_of_named(keyer_of(inputs), list(inputs), seen, world)
            else:
                shards, keys = _native.shards_of_rows(keyer_of(inputs), inputs, seen, world)
            digest.update(keys.encode())
            digest.update(labels.to(torch.int64).contiguous().numpy().tobytes())
            mine += shards.count(rank)
            seen += len(inputs)
        if seen == 0:
            raise ValueError("data gave no batches")
        mine_facts = ("facts", dict(facts, samples=seen, data=digest.hexdigest()), mine, where)
    except Exception as e:  # every rank stops with it
        mine_facts = _error_of(e)
    every = _exchanged(mine_facts, world)
    first = every[0][1]
    for r, message in enumerate(every):
        theirs = message[1]
        for name in first:
            if theirs[name] == first[name]:
                continue
            if name == "data":
                raise ValueError(f"rank {r} keys other samples (or labels) than rank 0: every rank "
                                 "must call build with the same data in the same order")
            raise ValueError(f"rank {r}'s {name} is {theirs[name]!r}, rank 0's {first[name]!r}: "
                             "every rank must call build with the same prefix and options")
    places = [m[3] for m in every]
    for r, place in enumerate(places):
        if place is not None and place in places[:r]:
            raise ValueError(f"ranks {places.index(place)} and {r} of this sharded build were given "
                             "one directory: every rank builds its own shard into its own cache "
                             "(put {rank} in the path on a machine of several ranks)")
    for r, message in enumerate(every):
        count = message[2]
        if count == 0:
            raise ValueError(f"shard {r} of {world} would hold none of the split's {seen} samples: "
                             "build with fewer ranks")
    return seen, mine


def _build_sharded(loader, keyer_of, facts, one_process, rank, world, check=None, where=None):
    """The build with sharded=True: the key pass (_shard_of_split), then this rank builds its own
    shard into its own cache as one process does (one_process(shard): the whole split's chunks,
    the writer keeping the shard's rows). No rank waits for another until the end, where the
    reports (or an error: raised on every rank) are exchanged. Returns the job's report: the
    shards' counts added up, each rank's own under per_shard."""
    n, mine = _shard_of_split(loader, keyer_of, rank, world, facts, check, where)
    try:
        own = ("report", one_process((rank, world, mine, n)))
    except Exception as e:
        own = _error_of(e)
    shards = [m[1] for m in _exchanged(own, world)]
    job = dict(shards[rank])
    for name in ("samples", "unique", "computed", "skipped", "index_written", "bytes", "records",
                 "cache_records", "prefix_seconds"):
        job[name] = sum(s[name] for s in shards)
    job["seconds"] = max(s["seconds"] for s in shards)
    job["samples_per_s"] = job["samples"] / job["seconds"] if job["seconds"] > 0 else 0.0
    job["ranks"] = world
    job["per_shard"] = shards
    return job


def _loader(data, batch_size, num_workers):
    """(batches, sample count, description) for a map-style Dataset or a DataLoader."""
    DataLoader = torch.utils.data.DataLoader
    if isinstance(data, DataLoader):
        if data.batch_size is None:
            raise ValueError("a DataLoader given to build must batch (batch_size is None)")
        n = len(data.sampler)
        if data.drop_last:
            n = len(data) * data.batch_size
        return data, n, f"python:{type(data.dataset).__name__}:{n}"
    if isinstance(data, torch.utils.data.IterableDataset) or not hasattr(data, "__getitem__") \
            or not hasattr(data, "__len__"):
        raise ValueError("data must be a map-style Dataset of (input, label) or a DataLoader, "
                         f"not {type(data).__name__}")
    n = len(data)
    # No batch larger than the data (a DataLoader allocates a list of batch_size items first).
    loader = DataLoader(data, batch_size=max(1, min(batch_size, n)), shuffle=False,
                        num_workers=num_workers, collate_fn=_collate)
    return loader, n, f"python:{type(data).__name__}:{n}"


def _original(prefix):
    """The module a torch.compile'd prefix wraps (its _orig_mod: the same weights and the same
    outputs, so the same cache), else prefix itself."""
    orig = getattr(prefix, "_orig_mod", None)
    if isinstance(prefix, torch.nn.Module) and isinstance(orig, torch.nn.Module):
        return orig
    return prefix


def _identity(prefix, model_id):
    """(model, fingerprint) of the cache's identity: the name of the prefix's class (of the
    module torch.compile wrapped) unless model_id names it, and the hash of its state_dict."""
    if model_id is not None and (not isinstance(model_id, str) or not model_id):
        raise ValueError("model_id must be a non-empty string")
    prefix = _original(prefix)
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
_TOKENIZER_PROBE = ["The Quick brown fox, 42 times: naïve café Ünïcode — “quoted” ünd ÆØÅ ß 東京 🙂!",
                    " ".join(f"word{i} w{i % 7}x" for i in range(1500))]


def _preprocessing(tokenizer):
    """The manifest's preprocessing of a cache whose inputs `tokenizer` tokenizes: "python", and
    with a tokenizer the hash of its output for _TOKENIZER_PROBE (as build calls it: _tokenized),
    so that a cache built with another vocabulary, normalisation or cut (another max_length) is
    refused as stale instead of serving records of other tokens. A tokenizer of its own that
    cannot take those texts (a toy vocabulary) is identified by its state instead
    (_tokenizer_state: its vocabulary and settings); ValueError when it has none to take."""
    if tokenizer is None:
        return "python"
    try:
        probe = _tokenized(tokenizer, _TOKENIZER_PROBE)
        names = sorted(n for n, t in probe.items() if isinstance(t, torch.Tensor))
        failure = "it gave no tensors"
    except Exception as e:  # noqa: BLE001: whatever a tokenizer of the user's raises
        names, failure = [], f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if not names:
        state = _tokenizer_state(tokenizer)
        if state is None:
            raise ValueError("tokenizer= cannot be identified for the cache: it fails on recycle's "
                             f"probe texts ({failure[:120]}) and has no get_vocab(): give a "
                             "tokenizer that takes any text, or one with get_vocab() (its "
                             "vocabulary)")
        return f"python, tokenizer {hashlib.sha256(state).hexdigest()[:16]}"
    _right_padded(probe)
    digest = _native.tensors_fingerprint(names, [probe[n] for n in names])
    return f"python, tokenizer {digest[:16]}"


# What a tokenizer's settings may hold that changes its tokens (beside its vocabulary).
_TOKENIZER_SETTINGS = ("model_max_length", "max_length", "truncation_side", "do_lower_case",
                       "strip_accents", "add_prefix_space")


def _tokenizer_state(tokenizer):
    """A tokenizer's identity taken from its state, as bytes: its class, get_vocab(), its
    settings (the scalars of a transformers tokenizer's init_kwargs but file names, or of
    another's public attributes; _TOKENIZER_SETTINGS; padding_side aside: build pads on the
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
    for name in _TOKENIZER_SETTINGS:
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


def _rows(out, k):
    """The first k rows of a prefix's output (a tensor, a tuple/list or a dict of tensors)."""
    if isinstance(out, torch.Tensor):
        return out[:k]
    if isinstance(out, dict):
        return {name: t[:k] for name, t in out.items()}
    return type(out)(t[:k] for t in out)


class _ShareTimer:
    """The prefix's share of the forward time: the head timed on up to 64 outputs of the first two
    batches the prefix computed (the second's figure kept: the first pays one-time costs)."""

    def __init__(self, head):
        self.head, self.batches, self.share = head, 0, None

    def measure(self, raw, rows, prefix_seconds):
        if self.head is None or self.batches >= 2 or rows < 2:  # rows 1: the layout probe
            return
        self.batches += 1
        k = min(rows, 64)
        sample = _rows(raw, k)
        _, restore = _eval_mode(self.head)
        try:
            with torch.no_grad():
                start = time.perf_counter()
                result = self.head(sample)
                if isinstance(result, torch.Tensor) and result.is_cuda:
                    torch.cuda.synchronize(result.device)
                head_seconds = time.perf_counter() - start
        finally:
            restore()
        per_prefix, per_head = prefix_seconds / rows, head_seconds / k
        if per_prefix + per_head > 0:
            self.share = per_prefix / (per_prefix + per_head)

    def report(self):
        if self.share is None:
            return {}
        s = self.share
        rest = max(1.0 - s, 1e-9)
        return {"prefix_share": s, "expected_speedup_vs_full": 1.0 / rest,
                "expected_speedup_vs_online": (s + 3 * rest) / (3 * rest)}


def _plain_interval():
    """Seconds between plain progress lines: RECYCLE_PROGRESS_SECONDS (default 30; 0: none)."""
    try:
        s = float(os.environ.get("RECYCLE_PROGRESS_SECONDS", "30"))
    except ValueError:
        return 30.0
    return max(s, 0.0) if math.isfinite(s) else 30.0


class _Progress:
    """Progress on stderr. mode "bar": one line redrawn at most 4 times a second, "build SPLIT:
    DONE/TOTAL samples (P%)", ended with the time taken; "lines" (stderr not a terminal: nohup, a
    pipe, a scheduler's log): a plain line every RECYCLE_PROGRESS_SECONDS (default 30), with the
    rate and ETA, and a last one when any was printed; None: nothing."""

    def __init__(self, label, total, mode):
        self.label, self.total, self.mode = label, total, mode
        self.every = _plain_interval() if mode == "lines" else 0.0
        self.printed = False
        self.done, self.start = 0, time.perf_counter()
        self.last = 0.0 if mode == "bar" else self.start

    def advance(self, n):
        self.done += n
        now = time.perf_counter()
        if self.mode == "bar" and now - self.last >= 0.25:
            self.last = now
            self._draw("")
        elif self.mode == "lines" and self.every > 0 and now - self.last >= self.every:
            self.last = now
            self._line(False)

    def finish(self):
        if self.mode == "bar":
            self._draw(f" in {time.perf_counter() - self.start:.1f} s\n")
        elif self.printed:
            self._line(True)

    def _line(self, final):
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        percent = 100 * self.done // max(self.total, 1)
        tail = (f"done in {elapsed:.1f} s" if final else
                f"ETA {(self.total - self.done) / rate:.0f} s" if rate > 0 else "ETA --")
        sys.stderr.write(f"{self.label}: {self.done}/{self.total} samples ({percent}%), "
                         f"{rate:.0f} samples/s, {tail}\n")
        sys.stderr.flush()
        self.printed = True

    def _draw(self, end):
        percent = 100 * self.done // max(self.total, 1)
        sys.stderr.write(f"\r{self.label}: {self.done}/{self.total} samples ({percent}%){end}")
        sys.stderr.flush()


def build(path, data, prefix, split="train", keyer="tensor", codec="fp16", batch_size=64,
          model_id=None, classes=None, rebuild=False, compression="none", num_workers=0,
          flush_seconds=10.0, engine_model=None, engine_weights=None, engine_split_at=None,
          progress=None, head=None, sharded=False, tokenizer=None):
    """Runs `prefix` once per distinct sample of `data` and stores its outputs in the cache at
    `path` (created when missing), split `split`, in data's order.

    data: a map-style Dataset of (input, label) (read in order, batch_size at a time, by a
    DataLoader with num_workers) or a DataLoader that batches (read as it iterates: keep its
    order fixed). prefix: an nn.Module (run in eval mode under no_grad, its state_dict hashed
    into the cache's identity) or any callable from a batch tensor to a tensor or a tuple/dict
    of tensors (name it with model_id). keyer: "tensor" (XXH3-128 of each input's dtype, shape
    and bytes: the engine's xxh3), "id" (the position), or a registered keyer's spec. codec:
    fp32, fp16, bf16 or int8 for the floating outputs. classes: the class names (default:
    data's .classes when it has them, else "0".."K-1" from the labels).

    Resumes a build that was killed: what was written is kept, only what is missing is
    computed (chunks reach the disk at a flush at least every flush_seconds, so a kill loses at
    most about that much work; 0 flushes after every chunk). Writes nothing when the split is
    complete with the same samples. Refuses (StaleCacheError) a cache built for another prefix,
    keyer, codec or record layout, as recycle-build does; rebuild=True deletes it first.

    Inputs may also be texts or named tensors, as text models take them (in one process or
    under torch.distributed, as tensors): a sample's input a string, keyed by its characters (keyer "text", or a
    "text:..." spec) and tokenized for the prefix by `tokenizer` (a transformers tokenizer, called
    on the chunk's texts to compute with padding=True, truncation=True, return_tensors="pt"); or
    a dict (or tuple) of tensors such as one text's unpadded tokenizer output (1-D input_ids and
    attention_mask, lengths varying from sample to sample; a leading dimension of 1 is dropped),
    keyed by every tensor's name, dtype, shape and bytes, and padded into one batch for the
    prefix (input_ids with tokenizer.pad_token_id when a tokenizer is given, else 0). Their
    records are as long as the text: when the prefix returns a mask [B, L] ("mask" or
    "attention_mask"; else the inputs' attention_mask), every output with L positions in
    dimension 1 is stored with the positions the mask keeps only (record shape [-1, ...]), and
    readers pad each batch to its longest, the mask's padding 0 (docs/hf.md).

    For recycle-train --cache, name the model as the engine knows it: engine_model (an encoder
    spec, e.g. "torchscript:FILE" of the whole model scripted as an nn.Sequential) or
    engine_weights (a recycle-train --save-model file), and engine_split_at (the name of the
    prefix's last block; docs/torchscript.md says how a scripted model's blocks are named). The
    cache's identity and the head's initial weights are then the engine's, and the outputs of
    the first rows computed are checked against the engine's prefix (ValueError when they
    differ: another model). classes (or data's .classes) are required then.

    head: the rest of the model (a callable taking the prefix's output, as your training step
    gives it). When given, it is timed (eval mode, no_grad) on up to 64 outputs of the first
    batches computed, and the report adds prefix_share (the prefix's share of the whole
    forward time) and the epoch speedups that implies, expected_speedup_vs_full (1 / (1 - s))
    and expected_speedup_vs_online ((s + 3(1 - s)) / 3(1 - s)): a backward costs about two
    forwards, reading the cache is not counted.

    progress: a line on stderr that counts the samples done, redrawn (True; the default when
    stderr is a terminal), or by default elsewhere (a log, a pipe) a plain line every
    RECYCLE_PROGRESS_SECONDS (30) with the rate and ETA; False: none. Under a torch.distributed
    group rank 0 reports, counting every rank's samples.

    Under an initialised torch.distributed group (world size > 1) every rank must call build
    with the same data in the same order: rank r runs the prefix on every world-th sample that
    needs it, and rank 0 writes them all into the one cache. Returns recycle-build --json's
    fields (samples, unique, computed, skipped, bytes, seconds, samples_per_s, ...), on every
    rank.

    sharded=True (docs/scale.md): every rank builds its own shard of the split into its own
    cache at `path` ("{rank}" in it is replaced by the rank: ranks on one machine need it),
    as recycle-build --sharded does, with no file or directory shared between ranks: rank r keeps
    the samples whose content key falls in shard r of the world size ("xxh3_64(key) % count",
    written in the split's manifest entry with the shard's index and count and the split's
    sample count). Every rank reads the data twice: once to key it (the ranks check through
    torch.distributed that they key the same samples with the same labels and build the same
    cache, and that no shard is empty), then to build its shard, running the prefix on its own
    samples only. A killed rank's shard resumes as a cache does. recycle.CachedLoader(...,
    sharded=True) and recycle-train --sharded read the shards. Returns the job's report on every
    rank: the shards' counts added up, `shards`, this rank's `shard`, and each rank's own report
    under `per_shard`; the progress line (rank 0) follows rank 0's shard.
    """
    dist = torch.distributed
    group = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    rank, world = (dist.get_rank(), dist.get_world_size()) if group else (0, 1)
    if not isinstance(sharded, bool):
        raise ValueError(f"sharded must be True or False, not {sharded!r}")
    if sharded and isinstance(path, (str, os.PathLike)):
        path = os.fspath(path).replace("{rank}", str(rank))
    path = _path(path)
    if not callable(prefix):
        raise ValueError(f"prefix must be an nn.Module or a callable, not {type(prefix).__name__}")
    for name, value in (("batch_size", batch_size), ("num_workers", num_workers)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, not {value!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if not isinstance(split, str) or not isinstance(codec, str) or not isinstance(keyer, str):
        raise ValueError("split, codec and keyer must be strings")
    keyer_spec = "xxh3" if keyer == "tensor" else keyer
    for name, value in (("engine_model", engine_model), ("engine_weights", engine_weights),
                        ("engine_split_at", engine_split_at)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
    model, fingerprint = _identity(prefix, model_id)
    preprocessing = _preprocessing(tokenizer)
    loader, n, description = _loader(data, batch_size, num_workers)
    if n < 1:
        raise ValueError("data has no samples")
    if classes is None:
        dataset = getattr(loader, "dataset", data)
        classes = getattr(dataset, "classes", None)
    class_names = [str(c) for c in classes] if classes is not None else []

    if head is not None and not callable(head):
        raise ValueError(f"head must be an nn.Module or a callable, not {type(head).__name__}")
    device, restore_modes = _eval_mode(prefix)
    prefix_seconds = 0.0
    share = _ShareTimer(head)

    def run_prefix(x):
        nonlocal prefix_seconds
        rows = len(next(iter(x.values()))) if isinstance(x, dict) else len(x[0]) \
            if isinstance(x, tuple) else len(x)
        start = time.perf_counter()
        with torch.no_grad():
            raw = prefix(_on_device(x, device))
            out = _outputs(raw, rows)
        seconds = time.perf_counter() - start
        prefix_seconds += seconds
        share.measure(raw, rows, seconds)
        return out

    def prefix_input(inputs, rows):
        return _prefix_input(inputs, rows, tokenizer)

    def outputs_of(inputs, rows):
        """The prefix's named outputs for rows `rows` of a batch and, for records as long as the
        text, each row's length (cut to it: the kept positions first), else []."""
        x = prefix_input(inputs, rows)
        named = run_prefix(x)
        lengths = []
        if not isinstance(inputs, torch.Tensor):
            named, _, cut = _sequence_cut(named, x)
            lengths = cut or []
        return named, lengths

    def computed(inputs, rows):
        """The records' tensors for rows `rows` (arranged as the layout) and their lengths."""
        named, lengths = outputs_of(inputs, rows)
        return _arranged(named, layout), lengths

    def add_chunk(writer, inputs, labels):
        if isinstance(inputs, _Texts):
            return writer.add_text_chunk(list(inputs), labels)
        if isinstance(inputs, _Named):
            return writer.add_named_chunk(list(inputs), labels)
        return writer.add_chunk(inputs, labels)

    layout = []  # (name, dtype, shape) of each record tensor, in the records' order

    def keyer_of(inputs):
        """The keyer spec of a batch's inputs: texts are keyed by their characters ("text")
        unless another keyer is named."""
        return "text" if isinstance(inputs, _Texts) and keyer == "tensor" else keyer_spec

    def open_writer(inputs, shard=None):
        """The cache opened for writing, its record layout from the prefix's output for the
        first sample (one forward); a dict's keys in a stored cache's order when they are its
        names (then any key order matches it). shard: (index, count, the shard's samples, the
        split's) for a shard of a sharded build."""
        index, count, samples, split_samples = shard or (0, 0, n, 0)
        x = prefix_input(inputs, [0])
        probe = run_prefix(x)
        sequences = set()
        if not isinstance(inputs, torch.Tensor):
            probe, sequences, _ = _sequence_cut(probe, x)
        stored = _stored_layout(path, rebuild)
        if stored is not None and sorted(stored) == sorted(n for n, _ in probe):
            probe = sorted(probe, key=lambda named: stored.index(named[0]))
        layout[:] = [(name, dtype, [-1] + shape[1:] if name in sequences else shape)
                     for name, dtype, shape in _layout_of(probe)]
        spec = keyer_of(inputs)
        input_shape = list(inputs.shape[1:]) if isinstance(inputs, torch.Tensor) else []
        return _native.CacheWriter(filled(
            _native.WriterOptions(), cache_dir=path, split=split, data=description, samples=samples,
            shard_index=index, shard_count=count, split_samples=split_samples,
            class_names=class_names, model=model, fingerprint=fingerprint, split_at="prefix",
            keyer=spec, codec=codec, input_shape=input_shape,
            preprocess=preprocessing if isinstance(inputs, _Texts) else "python",
            layout=[_native.WriterTensor(*t) for t in layout], compression=compression, rebuild=bool(rebuild),
            flush_seconds=float(flush_seconds), engine_model=engine_model or "",
            engine_weights=engine_weights or "", engine_split_at=engine_split_at or ""))

    if progress is None:
        mode = "bar" if sys.stderr.isatty() else "lines"
    else:
        mode = "bar" if progress else None
    bar = _Progress(f"build {split}", n, mode if rank == 0 else None)  # rank 0 draws it

    def one_process(shard=None):
        """The build as one process makes it (of a shard: `shard` as open_writer takes it, the
        writer keeping the shard's rows of the whole split's chunks): its report."""
        writer, kinds = None, {}
        try:
            seen = 0
            for batch in loader:
                inputs, labels = _split_batch_checked(batch, seen, kinds)
                seen += len(inputs)
                if writer is None:
                    writer = open_writer(inputs, shard)
                rows = add_chunk(writer, inputs, labels)
                outputs, lengths = computed(inputs, rows) if rows else ([], [])
                writer.write_chunk(outputs, lengths)
                bar.advance(len(inputs))
            if writer is None:
                raise ValueError("data gave no batches")
            report = json.loads(writer.finish())
            report["prefix_seconds"] = prefix_seconds
            bar.finish()
            return report
        finally:
            if writer is not None:
                writer.close()  # the cache's writer lock, released now whatever happened

    try:
        if sharded:
            facts = {"model": model, "fingerprint": fingerprint, "preprocess": preprocessing,
                     "keyer": keyer_spec, "codec": codec, "split": split, "classes": class_names}
            # rebuild=True: every rank checks that its cache may be deleted before any deletes.
            check = (lambda: _native.check_rebuild(path)) if rebuild else None
            report = _build_sharded(loader, keyer_of, facts, one_process, rank, world, check,
                                    _location(path) if isinstance(path, str) else None)
        elif group:
            report = _build_distributed(loader, outputs_of, add_chunk, open_writer, layout, rank,
                                        world, bar)
            report["prefix_seconds"] = prefix_seconds
        else:
            report = one_process()
    finally:
        restore_modes()
    report.update(share.report())
    return report
