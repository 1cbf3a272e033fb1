"""Small helpers the package's modules share: a cache path checked, tensors moved to a device,
samples' tensors stacked into a batch, a record's tensors as one activation."""
import os

import torch


def on_device(x, device):
    """`x` (a tensor, tensors in tuples, lists and dicts, anything else as it is) on `device`
    (None: all as it is)."""
    if device is None:
        return x
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, tuple):
        return tuple(on_device(v, device) for v in x)
    if isinstance(x, list):
        return [on_device(v, device) for v in x]
    if isinstance(x, dict):
        return {k: on_device(v, device) for k, v in x.items()}
    return x


def cache_dir(path):
    """A cache's path as a string (ValueError for anything but a string or os.PathLike)."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a string or os.PathLike, not {type(path).__name__}")
    return os.fspath(path)


def activation(tensors, names, row=None):
    """One tensor as it is, several as a dict by name (the record layout's names)."""
    if row is not None:
        tensors = [t[row] for t in tensors]
    if len(tensors) == 1:
        return tensors[0]
    return dict(zip(names, tensors))


def stacked(tensors):
    """Samples' tensors as one batch: stacked, those that differ in their first dimension (records
    as long as the text) padded at its end with zeros to the longest (a mask's padding 0)."""
    if tensors[0].dim() == 0 or len({t.shape for t in tensors}) == 1:
        return torch.stack(tensors)
    return torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True)
