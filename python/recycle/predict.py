"""recycle.predict: a trained head's predictions from the cache, as recycle-predict makes them."""
import json
import os

from . import _native


def _text(name, value):
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name} must be a string or os.PathLike, not {type(value).__name__}")
    return os.fspath(value)


def predict(path, head, weights, data, out, split="test", classes="", limit=0, transform="",
            top_k=0, write_back=False, batch_size=256, threads=0):
    """Predicts every sample of `data` (a dataset spec as the tools take it: "fashion-mnist",
    "imagefolder:DIR", "npy:DIR", ...; `split`, `classes`, `limit` and `transform` as their
    flags) with `head` (a file of recycle-train --save-head) over the cache at `path`: a sample
    whose key the cache holds skips the frozen prefix, any other runs the prefix of `weights`
    (the weights the cache was built from), then the head. Writes one row per sample to `out`
    (.jsonl or .csv) and returns recycle-predict --json's object as a dict: samples, hits,
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
    report = json.loads(_native.predict(
        _text("path", path), _text("head", head), _text("weights", weights), _text("data", data),
        _text("split", split), _text("classes", classes), limit, _text("transform", transform),
        _text("out", out), top_k, bool(write_back), batch_size, threads))
    if report.get("accuracy", -1) is not None and report.get("accuracy", -1) < 0:
        report["accuracy"] = None
    return report
