"""recycle.CachedLoader: batches of a cache split, read and decoded by the engine in C++."""
import json
import os

import torch

from . import _native, _tensors
from ._options import filled


def _dist_default(rank, world_size):
    """rank and world_size as given, or torch.distributed's when a group is initialised."""
    dist = torch.distributed
    initialised = dist.is_available() and dist.is_initialized()
    if rank is None:
        rank = dist.get_rank() if initialised else 0
    if world_size is None:
        world_size = dist.get_world_size() if initialised else 1
    return int(rank), int(world_size)


def _device(device):
    """`device` as a torch.device this process can use (None stays None), or ValueError: the
    engine's rule, the tools' --device (cpu, cuda or cuda:N, checked by usable_device_name)."""
    if device is None:
        return None
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise ValueError(f"device must be a string or a torch.device, not {type(device).__name__}")
    return torch.device(_native.usable_device_name(device, "device"))


def _even_share(path, split, shard, rank, world_size, size):
    """The samples every rank's epoch takes when each reads its own shard: ceil(the shards'
    samples / world_size), a rank's share of a shared cache (an all_reduce over
    torch.distributed), as recycle-train --sharded takes. ValueError for a split that is not
    shard `rank` of `world_size`."""
    if shard is None:
        raise ValueError(f"cache {path} holds the whole split {split}, not a shard: sharded=True "
                         f"reads the shards of recycle-build --sharded")
    if shard["index"] != rank or shard["count"] != world_size:
        raise ValueError(f"cache {path} holds shard {shard['index']} of {shard['count']} of split "
                         f"{split}, and this is rank {rank} of {world_size}")
    if world_size == 1:
        return size
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError("sharded=True with world_size > 1 needs torch.distributed initialised: "
                         "the ranks agree on the samples every rank's epoch takes")
    # NCCL reduces only CUDA tensors; Gloo (and the rest) CPU ones.
    on = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    total = torch.tensor([size], dtype=torch.int64, device=on)
    dist.all_reduce(total)
    return -(-int(total.item()) // world_size)


class CachedLoader:
    """An iterable of (activations, labels) batches of one cache split.

    The engine draws each epoch's order (a permutation seeded by (seed, epoch) when shuffle,
    shared out by rank as DistributedSampler does: every world_size-th sample from rank, padded
    to a multiple of world_size), reads the records with RocksDB's MultiGet and decodes them on
    a background thread `prefetch` batches ahead (0: on the calling thread). RocksDB's block
    cache holds block_cache_mb of the records (256 by default, recycle-train's --memory-budget;
    it fills as records are read): memory stays bounded by it whatever the split's size, and a
    split that fits is read from memory after the first epoch, as fast as tensors held in
    memory. activations is a float32 tensor [n, ...] or a dict of named tensors; labels int64
    [n]. rank/world_size default from torch.distributed when it is initialised. Each iteration
    is one epoch: the first is epoch 0 and each one after it the next, unless set_epoch names it.
    Each iterator is an epoch of its own, as a DataLoader's are: an iterator started while another
    is still live (not exhausted nor closed) reads with a second engine loader (its own reading
    thread and block cache, dropped when it ends), so neither takes the other's batches; its
    epoch is drawn when iter() is called. Use it in the process that created it (not inside
    DataLoader workers). device (default: the
    CPU) is where the batches go: "cuda" has the background thread make them on the GPU, a
    batch or two ahead (pinned on the host, copied with non_blocking, fp16/bf16/int8 records
    sent as stored and widened there); refused with ValueError where no GPU is usable.

    group_by_length=True (records as long as the text) orders each epoch as transformers'
    group_by_length does: the shuffled order cut into megabatches of 50 batches, each sorted
    by length, longest first, the megabatch of the longest sample first; a batch then holds
    texts of similar length and pads little. The lengths are read when the loader is made:
    every record of the split once (headers parsed, nothing decoded). ValueError for a split
    whose records are all of one shape.

    sharded=True reads this rank's own shard of a cache built with recycle-build --sharded
    (docs/scale.md): "{rank}" in path is replaced by the rank, the split must be shard `rank` of
    `world_size`, each epoch shuffles within the shard, and every rank takes ceil(the split's
    samples / world_size) of it, as a rank of a shared cache does (the first of its order, or
    its own first samples again, as DistributedSampler pads: the count is agreed on with an
    all_reduce, so torch.distributed must be initialised when world_size > 1). A shard read
    with sharded=False is refused: it holds a part of the split.

    state_dict() and load_state_dict() resume an epoch where a killed job left it, as torchdata's
    StatefulDataLoader does: a loader given the state of another over the same split and
    options gives the batches that one had not given yet, the same samples in the same order
    (the batches before are not read).
    """

    def __init__(self, path, split="train", batch_size=128, shuffle=True, seed=0, rank=None,
                 world_size=None, drop_last=False, prefetch=2, allow_partial=False,
                 block_cache_mb=256, device=None, sharded=False, group_by_length=False):
        for name, value in (("batch_size", batch_size), ("seed", seed), ("prefetch", prefetch)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int, not {value!r}")
        if seed < 0:
            raise ValueError(f"seed must be 0 or more, not {seed}")
        self.device = _device(device)
        rank, world_size = _dist_default(rank, world_size)
        if sharded:
            path = str(path).replace("{rank}", str(rank))
        self.path = _tensors.cache_dir(path)
        self.split = split
        self.batch_size = batch_size
        # For a GPU the engine's loader makes the batches there: pinned on the host, copied
        # asynchronously on its loading thread, compact records (fp16, bf16, int8) sent as
        # stored and widened on the GPU.
        cuda = self.device is not None and self.device.type == "cuda"
        self._options = dict(
            reader=dict(cache_dir=self.path, split=split, allow_partial=bool(allow_partial),
                        block_cache_mb=int(block_cache_mb)),
            batch_size=batch_size, shuffle=bool(shuffle), seed=seed, rank=rank,
            world_size=world_size, drop_last=bool(drop_last), prefetch=prefetch,
            device=str(self.device) if cuda else "cpu", group_by_length=bool(group_by_length))
        if sharded:  # the shard read by this rank alone, its epoch an even share
            self._options.update(rank=0, world_size=1)
        self._native = self._open()
        self.manifest = json.loads(self._native.manifest_json())
        shard = self.manifest["splits"].get(split, {}).get("shard")
        if sharded:
            self._options["epoch_samples"] = _even_share(self.path, split, shard, rank,
                                                         world_size, self._native.size())
            self._native = self._open()
        elif shard is not None:
            raise ValueError(f"cache {self.path} holds shard {shard['index']} of {shard['count']} "
                             f"of split {split}: read it with sharded=True, each rank its own")
        self._native_in_use = False  # a live iterator reads with self._native
        self.rank, self.world_size = rank, world_size
        self.tensor_names = self._native.tensor_names()
        self._epoch = 0
        self._first_batch = 0  # of the next iteration's epoch: load_state_dict's
        self._position = (0, 0)  # (epoch, batches given) of the latest iteration
        self._pid = os.getpid()

    def _open(self):
        return _native.CacheLoader(filled(_native.LoaderOptions(), **self._options))

    def set_epoch(self, epoch):
        """The epoch the next iteration draws its order for (as DistributedSampler.set_epoch)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be an int >= 0, not {epoch!r}")
        if epoch != self._epoch:
            self._first_batch = 0  # a resumed epoch stays resumed when set_epoch names it
        self._epoch = epoch

    def _order_facts(self):
        """What fixes each epoch's batches besides its number."""
        o = self._options
        return {"split": self.split, "samples": self.samples, "batch_size": self.batch_size,
                "shuffle": o["shuffle"], "seed": o["seed"], "rank": self.rank,
                "world_size": self.world_size, "drop_last": o["drop_last"],
                "group_by_length": o["group_by_length"]}

    def state_dict(self):
        """Where the loader is: the epoch of its latest iteration and the batches that iteration
        has given ({"epoch": e, "batches": k}; once an iteration has ended, the next epoch and 0),
        with what fixes the order (seed, shuffle, batch size, rank, world size, the split's
        samples, ...), for load_state_dict. Save it with the model and optimizer after a step."""
        epoch, batches = self._position
        return dict(self._order_facts(), epoch=epoch, batches=batches)

    def load_state_dict(self, state):
        """The next iteration resumes where state_dict() said: its epoch from the batch after
        the last one given (a later set_epoch of another epoch starts that one whole instead).
        ValueError in one line when the state is not a state_dict's or was taken of a loader
        whose batches differ (another seed, batch size, rank, split size, ...)."""
        if not isinstance(state, dict) or not {"epoch", "batches"} <= set(state):
            raise ValueError("load_state_dict takes what CachedLoader.state_dict() returned")
        for name, want in self._order_facts().items():
            if state.get(name, want) != want:
                raise ValueError(f"the state is of a loader with {name} {state[name]!r}, this one "
                                 f"has {want!r}: its batches would differ")
        epoch, batches = state["epoch"], state["batches"]
        for name, value in (("epoch", epoch), ("batches", batches)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"the state's {name} must be an int >= 0, not {value!r}")
        if batches > len(self):
            raise ValueError(f"the state says {batches} batches were given of an epoch of "
                             f"{len(self)}")
        self._epoch, self._first_batch = epoch, batches
        self._position = (epoch, batches)

    def __len__(self):
        """Batches per epoch on this rank."""
        return len(self._native)

    @property
    def samples(self):
        """Samples in the split."""
        return self._native.size()

    def __iter__(self):
        if os.getpid() != self._pid:
            # Its reading thread and RocksDB handle stayed in the parent: a fork()ed copy would
            # wait for ever for batches nobody reads.
            raise RuntimeError("a CachedLoader cannot be used in a fork()ed child process (a "
                               "DataLoader worker, multiprocessing's fork): create it in the process "
                               "that iterates it, or give DataLoader workers a CachedDataset")
        epoch, first = self._epoch, self._first_batch
        self._epoch += 1
        self._first_batch = 0
        return self._batches(epoch, first)

    def _batches(self, epoch, first=0):
        """The batches of `epoch` from batch `first` on, read with self._native, or with a loader
        of its own when another iterator is reading with that one."""
        own = self._native_in_use
        native = self._open() if own else self._native
        if not own:
            self._native_in_use = True
        try:
            native.start_epoch(epoch, first)
            self._position = (epoch, first)
            names = self.tensor_names
            given = first
            while True:
                batch = native.next()
                if batch is None:
                    self._position = (epoch + 1, 0)
                    return
                tensors, labels = batch
                if self.device is not None and self.device.type != "cpu":
                    tensors = [t.to(self.device, non_blocking=True) for t in tensors]
                    labels = labels.to(self.device, non_blocking=True)
                given += 1
                self._position = (epoch, given)
                yield _tensors.activation(tensors, names), labels
        finally:
            if not own:
                self._native_in_use = False
