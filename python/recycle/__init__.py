"""recycle: the layer-recycling activation cache engine, from Python.

Keep your model and your training loop; the engine (C++, the same library as the recycle-*
tools) builds, stores, verifies and serves the frozen prefix's activations:

    import recycle
    recycle.build("cache", train_set, prefix)          # prefix: any nn.Module or callable
    ds = recycle.CachedDataset("cache")                 # ds[i] -> (activation, label)
    for x, y in recycle.CachedLoader("cache", "train", batch_size=128): ...
    cached = recycle.CachedPrefix("cache", prefix)      # head(cached(x)): misses run prefix
    recycle.export(prefix, (x,), "prefix.pt2")          # recycle-build --model pt2:prefix.pt2

See docs/python.md. Errors are Python exceptions carrying the engine's one-line message:
ValueError for bad arguments, StaleCacheError for a cache built for another prefix or
options, CorruptRecordError for a record that fails its checks.
"""
import torch  # torch first: the extension links its libraries and hands out its tensors

from ._build_info import TORCH_VERSION as _BUILT_FOR

if torch.__version__ != _BUILT_FOR:
    # Another torch's libraries would fail at import with an undefined symbol, or worse later.
    raise ImportError(f"recycle was built for torch {_BUILT_FOR}, but this environment has torch "
                      f"{torch.__version__} ({torch.__file__}): reinstall recycle here "
                      "(pip install --no-build-isolation ./python, docs/pytorch2.md)")

from ._native import StaleCacheError, CorruptRecordError
from .cache import inspect, verify
from .dataset import CachedDataset, collate
from .loader import CachedLoader
from .build import build
from .predict import predict, CachedPrefix
from .pt2 import export

__all__ = ["build", "export", "CachedDataset", "collate", "CachedLoader", "inspect", "verify",
           "predict", "CachedPrefix", "StaleCacheError", "CorruptRecordError"]
