"""The inputs a build reads (recycle.build, recycle.CachedPrefix): a dataset or DataLoader as
batches of (input, label), each batch's inputs checked as one kind (tensors, texts, or samples
of named tensors), and what the prefix is given for some rows of a batch (the tensor's rows,
the tokenizer's output for texts, named tensors padded into one batch)."""
import collections.abc
import functools

import torch

from . import _native, _records


def split_batch(batch, where, start=0):
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError(f"{where} must give (input, label) pairs, not {type(batch).__name__}")
    if len(batch) > 2:  # an index or a weight would be dropped without a word
        raise ValueError(f"{where} gives {len(batch)} items per sample; build stores (input, label) "
                         "pairs: wrap the dataset so that it gives (input, label) only")
    inputs, labels = batch[0], batch[1]
    if not isinstance(inputs, torch.Tensor):
        inputs = samples_of(inputs, where, start)
    if holds_strings(labels):
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


def named_sample(x, where):
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


class Texts(list):
    """A batch of texts (one string a sample)."""


class Named(list):
    """A batch of samples of named tensors ({name: tensor} each); `as_tuple` when the samples
    were tuples (the prefix then gets a tuple)."""
    as_tuple = False


def kind_of(x):
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


def described(kind):
    if kind in ("text", "tensor"):
        return f"a {kind}"
    return f"a dict of {_records.quoted_names(kind[1])}" if kind[0] == "dict" else f"a tuple of {kind[1]} tensors"


def unlike(where, i, kind, j, first, x=None):
    """The refusal of sample i's input (`x`, of `kind`) in a batch (or build) whose sample j's
    input is of kind `first`."""
    if kind is None:
        what = "None" if x is None else f"of type {type(x).__name__}"
        return (f"{where}: sample {i}'s input is {what}: inputs must be tensors, texts (with "
                "tokenizer=), or dicts/tuples of tensors"
                + (" (drop the samples without one)" if x is None else ""))
    if isinstance(kind, tuple) and isinstance(first, tuple) and kind[0] == first[0]:
        # padded into one batch by the first's names: another's would be dropped or missing
        return (f"{where}: sample {i}'s input is {described(kind)}, sample {j}'s "
                f"{described(first)}: every sample must give the same named tensors: give "
                "each sample the same keys")
    return (f"{where}: sample {i}'s input is {described(kind)}, sample {j}'s {described(first)}: "
            "one cache holds one kind of input: build each kind into its own cache")


def samples_of(inputs, where, start=0):
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
        return Named([{str(k): t[i] for k, t in inputs.items()} for i in range(rows.pop())])
    if isinstance(inputs, (tuple, list)) and inputs:
        kinds = [kind_of(x) for x in inputs]
        odd = next((i for i, k in enumerate(kinds) if k is None or k != kinds[0]), None)
        if odd is not None and (kinds[0] is not None or inputs[0] is None):
            raise ValueError(unlike(where, start + odd, kinds[odd], start, kinds[0],
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
            return Texts(inputs)
        if odd is None and kinds[0] != "tensor":
            samples = Named(named_sample(x, where) for x in inputs)
            samples.as_tuple = kinds[0][0] == "tuple"
            return samples
    raise ValueError(f"{where}: inputs must be tensors, texts (with tokenizer=), or dicts/tuples "
                     f"of tensors, not {type(inputs).__name__}")


def padded(samples, as_tuple, pad_values):
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


def prefix_input(inputs, rows, tokenizer):
    """What the prefix takes for rows `rows` (a list of ints) of a batch: the tensor's rows, the
    tokenizer's output for the texts, or the named tensors padded into one batch (input_ids
    with the tokenizer's pad_token_id when it has one, else 0)."""
    if isinstance(inputs, torch.Tensor):
        return inputs[torch.tensor(rows, dtype=torch.int64, device=inputs.device)]
    if isinstance(inputs, Texts):
        if tokenizer is None:
            raise ValueError("data: inputs are texts: pass tokenizer= (a transformers "
                             "tokenizer): the texts are keyed as they are and tokenized for "
                             "the prefix")
        return right_padded(tokenized(tokenizer, [inputs[r] for r in rows]))
    pad = getattr(tokenizer, "pad_token_id", None)
    return padded([inputs[r] for r in rows], inputs.as_tuple,
                   {} if pad is None else {"input_ids": pad})


def tokenized(tokenizer, texts):
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


def right_padded(out):
    """A tokenizer's output `out` (tokenized's), ValueError when its mask shows padding on the
    left all the same."""
    mask = out.get("attention_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.shape[1] > 1 and \
            bool((mask[:, 1:] > mask[:, :-1]).any()):
        raise ValueError("tokenizer= padded texts on the left: a text's record would depend "
                         "on the texts of its chunk: give a tokenizer that pads on the right "
                         "(padding_side=\"right\")")
    return out


def holds_strings(items):
    """Whether `items` is a string or a (nested) tuple/list whose first item is one (a batch of
    text as DataLoader collates it)."""
    while isinstance(items, (tuple, list)) and items:
        items = items[0]
    return isinstance(items, (str, bytes))


class Positions:
    """Where a batch's samples are in the split when they are not one after another (a rank's
    part or shard of a sharded build): `start + i` is the split position of the batch's i-th
    sample, as checked_batch counts, and the first's when it is shown."""

    def __init__(self, positions, first):
        self.positions, self.first = positions, first

    def __add__(self, i):
        return self.positions[self.first + i]

    def __int__(self):
        return self.positions[self.first]

    __index__ = __int__

    def __format__(self, spec):
        return format(int(self), spec)

    __str__ = __repr__ = lambda self: str(int(self))


def batch_start(positions, seen):
    """The split position of a batch's first sample after `seen` samples: seen itself when the
    batches are the whole split (positions None), else a Positions of the ones read."""
    return seen if positions is None else Positions(positions, seen)


def checked_batch(batch, start, kinds):
    """A batch's inputs and labels, checked; `start` is the position of its first sample.
    `kinds` is a dict the caller keeps for one pass over the data: the first batch's kind of
    input is noted in it, a later batch of another kind refused (a cache keys one kind)."""
    inputs, labels = split_batch(batch, "data", start)
    if len(inputs) != labels.shape[0]:
        raise ValueError(f"data: {len(inputs)} inputs with {labels.shape[0]} labels")
    kind = "tensor" if isinstance(inputs, torch.Tensor) else "text" if isinstance(inputs, Texts) \
        else ("tuple", len(inputs[0])) if inputs.as_tuple else ("dict", tuple(sorted(inputs[0])))
    kinds.setdefault("first", (kind, start))
    if kind != kinds["first"][0]:
        raise ValueError(unlike("data", start, kind, kinds["first"][1], kinds["first"][0]))
    # A class id is 0 to MAX_CLASS_ID, as recycle-build's sources check it: the cache's class
    # names grow to the largest label (2**40 ran out of memory after minutes).
    outside = (labels < 0) | (labels > _native.MAX_CLASS_ID)
    if bool(outside.any()):
        i = int(outside.nonzero()[0, 0])
        raise ValueError("data: " + _native.class_id_problem(int(labels[i]), start + i))
    if isinstance(inputs, Named):
        for i, sample in enumerate(inputs):
            for name, t in sample.items():
                if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
                    raise ValueError(f"data: sample {start + i} holds NaN or infinity in "
                                     f"'{name}' (non-finite inputs are refused: the prefix's "
                                     "output for it would be cached)")
        return inputs, labels
    if isinstance(inputs, Texts):
        return inputs, labels
    if (inputs.is_floating_point() or inputs.is_complex()) and inputs.numel() > 0:
        # A NaN or an infinity would be keyed as it is and cached as the prefix's output for it.
        finite = torch.isfinite(inputs.reshape(inputs.shape[0], -1)).all(dim=1)
        if not bool(finite.all()):
            bad = start + int((~finite).nonzero()[0, 0])
            raise ValueError(f"data: sample {bad} holds NaN or infinity (non-finite inputs are "
                             "refused: the prefix's output for it would be cached)")
    return inputs, labels


def collate_inputs(items):
    """A DataLoader's batch of (input, label) items: the default collation for tensors; for
    texts and named tensors (which vary in length from sample to sample), or when any input is
    None, (the inputs as a list, the labels): the build checks them, naming the sample."""
    pairs = all(isinstance(it, (tuple, list)) and len(it) == 2 for it in items)
    if pairs and any(it[0] is None or isinstance(it[0], (str, collections.abc.Mapping, tuple, list))
                     for it in items):
        return [it[0] for it in items], [it[1] for it in items]
    return torch.utils.data.default_collate(items)


def loader_of(data, batch_size, num_workers):
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
                        num_workers=num_workers, collate_fn=collate_inputs)
    return loader, n, f"python:{type(data).__name__}:{n}"


def loader_at(data, positions, batch_size, num_workers):
    """A DataLoader over the samples `positions` of a map-style Dataset, in that order, batched
    as loader_of batches the whole."""
    subset = torch.utils.data.Subset(data, positions)
    return torch.utils.data.DataLoader(subset, batch_size=max(1, min(batch_size, len(subset))),
                                       shuffle=False, num_workers=num_workers,
                                       collate_fn=collate_inputs)
