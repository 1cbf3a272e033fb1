"""recycle.CachedDataset: a map-style torch Dataset over a cache split."""
import ctypes
import json
import os

import torch

from . import _native, _tensors
from ._options import filled



def _leak(obj):
    """Keeps `obj` alive to the end of the process, finalization included: a reader opened by
    the parent and inherited through fork is never closed by the child (its RocksDB handle is
    the parent's)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def collate(items):
    """A DataLoader's collate_fn for CachedDataset: items [(activation, label), ...] as
    (activations, labels int64 [n]), the activations stacked (a dict's tensors by name), records
    as long as the text padded to the batch's longest with their mask's padding 0: the batches
    CachedLoader gives."""
    activations = [a for a, _ in items]
    labels = torch.as_tensor([int(y) for _, y in items], dtype=torch.int64)
    if isinstance(activations[0], dict):
        return {name: _tensors.stacked([a[name] for a in activations]) for name in activations[0]}, labels
    return _tensors.stacked(activations), labels


class CachedDataset(torch.utils.data.Dataset):
    """ds[i] is (activation, label) of the split's i-th sample, in the order it was built.

    The activation is what the head takes: a float32 tensor (decoded from the cache's codec),
    or a dict of named tensors when the record holds several (a text cache: hidden states and
    lengths). The label is an int. Opening is read-only and safe beside a running build: the
    reader sees the batches written before it opened; an incomplete split is refused unless
    allow_partial. Works with DataLoader(num_workers > 0) (each worker opens its own reader)
    and with DistributedSampler. block_cache_mb bounds RocksDB's block cache of each reader.

    A shard of a cache built with recycle-build --sharded holds a part of the split: it is
    refused unless sharded=True, which reads that shard as a dataset of its own ("{rank}" in
    path replaced by torch.distributed's rank, 0 when it is not initialised). Each rank then
    reads its own shard whole: no DistributedSampler (CachedLoader(..., sharded=True) also gives
    every rank's epoch a shared cache's share of samples).
    """

    def __init__(self, path, split="train", allow_partial=False, block_cache_mb=32,
                 sharded=False):
        if not isinstance(split, str):
            raise ValueError(f"split must be a string, not {type(split).__name__}")
        if sharded:
            dist = torch.distributed
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
            path = str(path).replace("{rank}", str(rank))
        self.path = _tensors.cache_dir(path)
        self.split = split
        self.allow_partial = bool(allow_partial)
        self.block_cache_mb = int(block_cache_mb)
        self._reader = None
        self._pid = None
        reader = self._open()
        self._len = len(reader)
        self.tensor_names = reader.tensor_names()
        self.manifest = json.loads(reader.manifest_json())
        self.complete = reader.complete()
        shard = self.manifest["splits"].get(split, {}).get("shard")
        if shard is not None and not sharded:
            raise ValueError(f"cache {self.path} holds shard {shard['index']} of {shard['count']} "
                             f"of split {split}: read it with sharded=True, each rank its own")

    def _open(self):
        pid = os.getpid()
        if self._reader is None or self._pid != pid:
            if self._reader is not None:
                _leak(self._reader)
            self._reader = _native.SplitReader(filled(
                _native.ReaderOptions(), cache_dir=self.path, split=self.split,
                allow_partial=self.allow_partial, block_cache_mb=self.block_cache_mb))
            self._pid = pid
        return self._reader

    def __getstate__(self):  # pickled for spawned workers: they open their own reader
        state = dict(self.__dict__)
        state["_reader"] = None
        state["_pid"] = None
        return state

    def __len__(self):
        return self._len

    @property
    def labels(self):
        """int64 [len(ds)]: every sample's label, in order."""
        return self._open().labels()

    def __getitem__(self, index):
        if isinstance(index, torch.Tensor):
            index = int(index)
        if not isinstance(index, int):
            raise TypeError(f"CachedDataset indices are ints, not {type(index).__name__}")
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(f"index out of range for a split of {self._len} samples")
        tensors, labels = self._open().read(torch.tensor([index], dtype=torch.int64))
        return _tensors.activation(tensors, self.tensor_names, 0), int(labels[0])

    def __getitems__(self, indices):
        """The samples of one DataLoader batch, read at once (one MultiGet and one decode for the
        batch instead of one per sample): torch 2.x's DataLoader calls it when it batches, then
        collates the list as it would collate ds[i] for each i."""
        activations, labels = self.read(indices)
        labels = labels.tolist()
        if isinstance(activations, dict):
            return [({k: v[i] for k, v in activations.items()}, labels[i]) for i in range(len(labels))]
        return [(activations[i], labels[i]) for i in range(len(labels))]

    def read(self, indices):
        """Samples `indices` at once (one batched read): (activation [n, ...], labels [n])."""
        idx = torch.as_tensor(indices, dtype=torch.int64).reshape(-1)
        if idx.numel() and (int(idx.min()) < -self._len or int(idx.max()) >= self._len):
            raise IndexError(f"index out of range for a split of {self._len} samples")
        idx = torch.where(idx < 0, idx + self._len, idx)
        tensors, labels = self._open().read(idx)
        return _tensors.activation(tensors, self.tensor_names), labels
