"""Inference from the cache: recycle.predict (a saved head's predictions, as recycle-predict
makes them) and recycle.CachedPrefix (your prefix's outputs for your batches, from the cache
where it holds them)."""
import json
import os

import torch

from . import _identity, _inputs, _native, _records, _tensors
from ._options import filled


def _text(name, value):
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name} must be a string or os.PathLike, not {type(value).__name__}")
    return os.fspath(value)


def predict(path, head, weights, data, out, split="test", classes="", limit=0, transform="",
            top_k=0, write_back=False, batch_size=256, threads=0):
    """Predicts every sample of `data` (a dataset spec as the tools take it: "fashion-mnist",
    "imagefolder:DIR", "npy:DIR", ...; `split`, `classes`, `limit` and `transform` as their
    flags; classes "" takes the list the cache was built with) with `head` (a file of
    recycle-train --save-head) over the cache at `path`: a sample whose key the cache holds
    skips the frozen prefix, any other runs the prefix of `weights` (the weights the cache was
    built from; None: the file the cache records), then the head. Writes one row per sample to
    `out` (.jsonl or .csv) and returns recycle-predict --json's object as a dict: samples, hits,
    misses, accuracy (None without labels), seconds, ... `write_back` stores the misses' records
    so the next call hits. Raises ValueError for bad arguments, StaleCacheError for weights or a
    head of another cache, RuntimeError for the rest, each with the engine's one-line message."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k must be a non-negative int, not {top_k!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a non-negative int, not {limit!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"threads must be a non-negative int, not {threads!r}")
    path = _text("path", path)
    options = filled(
        _native.PredictOptions(), cache_dir=path, head=_text("head", head),
        weights="" if weights is None else _text("weights", weights),
        data=dict(spec=_text("data", data), split=_text("split", split),
                  classes=_text("classes", classes), limit=limit,
                  transform=_text("transform", transform)),
        out=_text("out", out), top_k=top_k, write_back=bool(write_back), batch=batch_size,
        threads=threads)
    try:
        report = json.loads(_native.predict(options))
    except ValueError:
        _refuse_a_python_prefixs_cache(path)  # the engine refused it in its tool's words
        raise
    if report.get("accuracy", -1) is not None and report.get("accuracy", -1) < 0:
        report["accuracy"] = None
    return report


def _refuse_a_python_prefixs_cache(path):
    """Raises ValueError in the caller's words when `path` is a cache a Python prefix filled
    (recycle.build: classifier "none"), which the engine's predict cannot run misses for. Reads
    the manifest only (KeyedReader: no index is read), and only after the engine refused."""
    try:
        manifest = json.loads(_native.KeyedReader(path, 1).manifest_json())
    except (RuntimeError, ValueError, OSError):
        return  # not such a cache: the engine's own message stands
    if manifest.get("classifier") == "none" and str(manifest.get("model", "")).startswith("python:"):
        texts = str(manifest.get("keyer", "")).startswith("text")
        call = "recycle.CachedPrefix(path, prefix, tokenizer=tokenizer)(texts)" if texts else \
            "recycle.CachedPrefix(path, prefix)"
        raise ValueError(f"cache {path} was filled by a Python prefix ({manifest['model']}, "
                         "through recycle.build), which recycle.predict cannot run for its misses: "
                         f"use {call} and apply your head to its output") from None


class CachedPrefix:
    """prefix(inputs), from the cache where it holds them: for inference in your own loop,
    with your own head (`head(cached(x))`).

    `path` is a cache that recycle.build filled from `prefix` (the same module and weights, or
    the same callable and model_id, and for texts the same tokenizer: refused with
    StaleCacheError otherwise, as build refuses them; checked when CachedPrefix is made, so do
    not change the prefix's weights after). Caches that carry an engine model's identity
    (recycle-build's, or build's with engine_model or engine_weights) are refused with
    ValueError: recycle.predict serves them. A call keys the batch `inputs` exactly as build
    keys its inputs, reads the samples the cache holds (hits) with one lookup, runs `prefix` on
    the others alone (misses; eval mode, no_grad, on the prefix's device), and returns what
    CachedLoader gives: a tensor [n, ...] (float32 from the codec), or a dict of named tensors
    when the records hold several. `inputs` are what build was given: a tensor [n, ...] (the
    batch as dimension 0), texts (a list of strings, tokenized by `tokenizer` for the misses),
    or samples of named tensors (a list of dicts such as one text's unpadded tokenizer output,
    or a dict of batch tensors). Records as long as the text come padded to the batch's
    longest, their mask's padding 0 (as CachedLoader's batches). Nothing is written: build again
    to store the misses. .hits and .misses count the samples so far. A cache keyed by sample id
    (keyer="id") is refused with ValueError."""

    def __init__(self, path, prefix, model_id=None, block_cache_mb=32, tokenizer=None):
        if not callable(prefix):
            raise ValueError(f"prefix must be an nn.Module or a callable, not {type(prefix).__name__}")
        if isinstance(block_cache_mb, bool) or not isinstance(block_cache_mb, int):
            raise ValueError(f"block_cache_mb must be an int, not {block_cache_mb!r}")
        self.path = _tensors.cache_dir(path)
        self._reader = _native.KeyedReader(self.path, block_cache_mb)
        self.names = list(self._reader.tensor_names())
        manifest = json.loads(self._reader.manifest_json())
        self._sequences = {t["name"] for t in manifest.get("record_layout", [])
                           if t["shape"] and t["shape"][0] == -1}
        self._texts = manifest.get("keyer", "").startswith("text")
        model, fingerprint = _identity.identity_of(prefix, model_id)
        stored = (manifest.get("model", ""), manifest.get("fingerprint", ""))
        if not stored[0].startswith("python:"):
            raise ValueError(f"cache {self.path} holds the identity of engine model {stored[0]} "
                             "(recycle-build, or recycle.build with engine_model or engine_weights), "
                             "which a Python prefix cannot be checked against: serve it with "
                             "recycle.predict")
        if stored != (model, fingerprint):
            what = "model" if stored[0] != model else "prefix fingerprint (weights)"
            have, want = (stored[0], model) if what == "model" else (stored[1], fingerprint)
            raise _native.StaleCacheError(
                f"cache {self.path} was built for another prefix: {what}: the cache has {have}, "
                f"this prefix is {want}")
        if self._texts and tokenizer is None:
            raise ValueError(f"cache {self.path} holds texts: pass tokenizer= (the one build "
                             "tokenized them with) to compute the misses")
        preprocessing = _identity.preprocessing_of(tokenizer if self._texts else None)
        if self._texts and manifest.get("preprocess") != preprocessing:
            raise _native.StaleCacheError(
                f"cache {self.path} was built with another tokenizer: preprocessing: the cache has "
                f"{manifest.get('preprocess')}, this tokenizer gives {preprocessing}")
        self.prefix, self.tokenizer = prefix, tokenizer
        self.hits = 0
        self.misses = 0

    def __call__(self, inputs):
        if isinstance(inputs, torch.Tensor):
            if self._sequences:
                raise ValueError(f"cache {self.path} holds records as long as the text: call it "
                                 "with what build was given (texts, or samples of named tensors), "
                                 "not a tensor")
            tensors, hit = self._reader.lookup(inputs)
            device = inputs.device
        else:
            samples = _inputs.samples_of(inputs, "CachedPrefix")
            if isinstance(samples, _inputs.Texts) != self._texts:
                raise ValueError(f"cache {self.path} was built from "
                                 f"{'texts' if self._texts else 'samples of named tensors'}: call it "
                                 f"with {'texts' if self._texts else 'those'}, not "
                                 f"{'texts' if isinstance(samples, _inputs.Texts) else 'named tensors'}")
            if isinstance(samples, _inputs.Texts):
                tensors, hit = self._reader.lookup_texts(list(samples))
            else:
                tensors, hit = self._reader.lookup_named(list(samples))
            inputs, device = samples, None
        miss = (~hit).nonzero().flatten()
        if len(miss) == len(hit) and len(miss) > 0 and isinstance(inputs, torch.Tensor):
            tensors = self._compute(inputs, None, tensors)  # every row a miss: no gather, no scatter
        elif len(miss) > 0:
            tensors = self._compute(inputs, miss, tensors)
        self.hits += int(hit.sum())
        self.misses += len(miss)
        if device is not None:
            tensors = [t.to(device) for t in tensors]
        return tensors[0] if len(tensors) == 1 else dict(zip(self.names, tensors))

    def _compute(self, inputs, miss, tensors):
        """The prefix on the misses' rows, written into their rows of `tensors` (returned); with
        miss None, on every row, its outputs returned in place of `tensors`. Records as long as
        the text: the batch widened to the longest of hits and misses."""
        device, restore_modes = _identity.eval_mode(self.prefix)
        try:
            x = inputs if miss is None else _inputs.prefix_input(inputs, miss.tolist(), self.tokenizer)
            rows = len(x) if isinstance(x, torch.Tensor) else len(miss)
            with torch.no_grad():
                out = _records.named_outputs(self.prefix(_tensors.on_device(x, device)), rows)
        finally:
            restore_modes()
        lengths = None
        if self._sequences:
            out, _, lengths = _records.sequence_cut(out, x)
        by_name = dict(out)
        if sorted(by_name) == sorted(self.names):  # a dict's keys in another order: by name
            out = [(name, by_name[name]) for name in self.names]
        if [name for name, _ in out] != self.names:
            raise ValueError(f"the prefix returned {[name for name, _ in out]}, the cache's records "
                             f"hold {self.names}")
        for (name, o), t in zip(out, tensors):
            want = tuple(t.shape[2:]) if name in self._sequences else tuple(t.shape[1:])
            have = tuple(o.shape[2:]) if name in self._sequences else tuple(o.shape[1:])
            if o.shape[0] != rows or have != want:
                raise ValueError(f"the prefix's output '{name}' has shape {tuple(o.shape[1:])} per "
                                 f"sample, the cache's records {tuple(t.shape[1:])}")
        if miss is None:
            return [o.detach().to(dtype=t.dtype) for (_, o), t in zip(out, tensors)]
        if lengths is not None:
            return self._merged(out, tensors, miss, lengths)
        for (_, o), t in zip(out, tensors):
            t.index_copy_(0, miss, o.detach().to("cpu", t.dtype))
        return tensors

    def _merged(self, out, tensors, miss, lengths):
        """The hits' padded records and the misses' outputs (each cut to its length) as one
        batch, padded to the longest with zeros."""
        merged = []
        for (name, o), t in zip(out, tensors):
            o = o.detach().to("cpu", t.dtype)
            if name not in self._sequences:
                merged.append(t.index_copy_(0, miss, o))
                continue
            rows = list(t.unbind(0))
            for i, (r, length) in enumerate(zip(miss.tolist(), lengths)):
                rows[r] = o[i, :length]
            merged.append(_tensors.stacked(rows))
        return merged
