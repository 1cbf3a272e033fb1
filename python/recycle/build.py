"""recycle.build: a cache filled by your own prefix, stored by the engine. The inputs it reads
(_inputs), the records it makes (_records), the identity it records (_identity), its progress
(_progress) and its ranks (_ranks) each have a module; this one has build and the one job it
runs."""
import json
import os
import sys
import time

import torch

from . import _identity, _inputs, _native, _progress, _ranks, _records, _tensors
from ._options import filled


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
    sample count). Of a map-style Dataset each rank reads about 2/world of the samples: it keys
    its part (the samples p with p % world == r) and 64 spot checks of the others', the ranks
    exchange their parts' keys and labels through torch.distributed (16 bytes a sample) and
    check that they build the same cache, that the spot checks agree and that no shard is
    empty; then each reads its own shard's samples and runs the prefix on them. A DataLoader
    (or keyer="id") is read whole twice instead: to key every sample, then to build the shard.
    A killed rank's shard resumes as a cache does. recycle.CachedLoader(..., sharded=True) and
    recycle-train --sharded read the shards. Returns the job's report on every
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
    path = _tensors.cache_dir(path)
    _check_arguments(prefix, batch_size, num_workers, split, codec, keyer, head,
                     engine_model=engine_model, engine_weights=engine_weights,
                     engine_split_at=engine_split_at)
    job = _Build(path, data, prefix, tokenizer, head, batch_size, num_workers,
                 dict(split=split, keyer=keyer, codec=codec, model_id=model_id, classes=classes,
                      rebuild=rebuild, compression=compression, flush_seconds=flush_seconds,
                      engine_model=engine_model, engine_weights=engine_weights,
                      engine_split_at=engine_split_at))
    job.bar = _progress.Progress(f"build {split}", job.n,
                                 _progress_mode(progress) if rank == 0 else None)  # rank 0 draws
    try:
        if sharded:
            report = job.sharded(rank, world)
        elif group:
            report = _ranks.build_distributed(job.loader, job.outputs_of, job.add_chunk,
                                              job.open_writer, job.layout, rank, world, job.bar)
            report["prefix_seconds"] = job.prefix_seconds
        else:
            report = job.one_process()
    finally:
        job.restore_modes()
    report.update(job.share.report())
    return report


def _check_arguments(prefix, batch_size, num_workers, split, codec, keyer, head, **engine):
    """ValueError in one line for an argument of build of the wrong kind."""
    if not callable(prefix):
        raise ValueError(f"prefix must be an nn.Module or a callable, not {type(prefix).__name__}")
    for name, value in (("batch_size", batch_size), ("num_workers", num_workers)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, not {value!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if not isinstance(split, str) or not isinstance(codec, str) or not isinstance(keyer, str):
        raise ValueError("split, codec and keyer must be strings")
    for name, value in engine.items():
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
    if head is not None and not callable(head):
        raise ValueError(f"head must be an nn.Module or a callable, not {type(head).__name__}")


def _progress_mode(progress):
    """The progress line's mode (_progress.Progress) for build's `progress` argument."""
    if progress is None:
        return "bar" if sys.stderr.isatty() else "lines"
    return "bar" if progress else None


class _Build:
    """One build of one split: the prefix (in eval mode until restore_modes), its identity, the
    data's batches, the record layout (filled by open_writer from the first sample's outputs),
    the time the prefix took and the head's timer."""

    def __init__(self, path, data, prefix, tokenizer, head, batch_size, num_workers, o):
        self.path, self.prefix, self.tokenizer, self.o = path, prefix, tokenizer, o
        self.keyer_spec = "xxh3" if o["keyer"] == "tensor" else o["keyer"]
        self.model, self.fingerprint = _identity.identity_of(prefix, o["model_id"])
        self.preprocessing = _identity.preprocessing_of(tokenizer)
        self.loader, self.n, self.description = _inputs.loader_of(data, batch_size, num_workers)
        # A map-style Dataset's samples can be read apart (a sharded build's parts and shards).
        self.loader_at = None
        if not isinstance(data, torch.utils.data.DataLoader):
            self.loader_at = lambda positions: _inputs.loader_at(data, positions, batch_size,
                                                                 num_workers)
        if self.n < 1:
            raise ValueError("data has no samples")
        classes = o["classes"]
        if classes is None:
            classes = getattr(getattr(self.loader, "dataset", data), "classes", None)
        self.class_names = [str(c) for c in classes] if classes is not None else []
        self.device, self.restore_modes = _identity.eval_mode(prefix)
        self.prefix_seconds = 0.0
        self.share = _progress.ShareTimer(head)
        self.layout = []  # (name, dtype, shape) of each record tensor, in the records' order
        self.bar = None

    def run_prefix(self, x):
        """The prefix's named outputs for its input x (no grad, timed)."""
        rows = len(next(iter(x.values()))) if isinstance(x, dict) else len(x[0]) \
            if isinstance(x, tuple) else len(x)
        start = time.perf_counter()
        with torch.no_grad():
            raw = self.prefix(_tensors.on_device(x, self.device))
            out = _records.named_outputs(raw, rows)
        seconds = time.perf_counter() - start
        self.prefix_seconds += seconds
        self.share.measure(raw, rows, seconds)
        return out

    def outputs_of(self, inputs, rows):
        """The prefix's named outputs for rows `rows` of a batch and, for records as long as the
        text, each row's length (cut to it: the kept positions first), else []."""
        x = _inputs.prefix_input(inputs, rows, self.tokenizer)
        named = self.run_prefix(x)
        lengths = []
        if not isinstance(inputs, torch.Tensor):
            named, _, cut = _records.sequence_cut(named, x)
            lengths = cut or []
        return named, lengths

    def add_chunk(self, writer, inputs, labels):
        """The chunk keyed by the writer: the rows it needs computed."""
        if isinstance(inputs, _inputs.Texts):
            return writer.add_text_chunk(list(inputs), labels)
        if isinstance(inputs, _inputs.Named):
            return writer.add_named_chunk(list(inputs), labels)
        return writer.add_chunk(inputs, labels)

    def keyer_of(self, inputs):
        """The keyer spec of a batch's inputs: texts are keyed by their characters ("text")
        unless another keyer is named."""
        if isinstance(inputs, _inputs.Texts) and self.o["keyer"] == "tensor":
            return "text"
        return self.keyer_spec

    def open_writer(self, inputs, shard=None):
        """The cache opened for writing, its record layout from the prefix's output for the
        first sample (one forward); a dict's keys in a stored cache's order when they are its
        names (then any key order matches it). shard: (index, count, the shard's samples, the
        split's) for a shard of a sharded build."""
        o = self.o
        index, count, samples, split_samples = shard or (0, 0, self.n, 0)
        x = _inputs.prefix_input(inputs, [0], self.tokenizer)
        probe = self.run_prefix(x)
        sequences = set()
        if not isinstance(inputs, torch.Tensor):
            probe, sequences, _ = _records.sequence_cut(probe, x)
        stored = _records.stored_layout(self.path, o["rebuild"])
        if stored is not None and sorted(stored) == sorted(n for n, _ in probe):
            probe = sorted(probe, key=lambda named: stored.index(named[0]))
        self.layout[:] = [(name, dtype, [-1] + shape[1:] if name in sequences else shape)
                          for name, dtype, shape in _records.layout_of(probe)]
        texts = isinstance(inputs, _inputs.Texts)
        return _native.CacheWriter(filled(
            _native.WriterOptions(), cache_dir=self.path, split=o["split"], data=self.description,
            samples=samples, shard=(index, count, split_samples),
            class_names=self.class_names, model=self.model, fingerprint=self.fingerprint,
            split_at="prefix", keyer=self.keyer_of(inputs), codec=o["codec"],
            input_shape=list(inputs.shape[1:]) if isinstance(inputs, torch.Tensor) else [],
            preprocess=self.preprocessing if texts else "python",
            layout=[_native.WriterTensor(*t) for t in self.layout],
            compression=o["compression"], rebuild=bool(o["rebuild"]),
            flush_seconds=float(o["flush_seconds"]), engine_model=o["engine_model"] or "",
            engine_weights=o["engine_weights"] or "", engine_split_at=o["engine_split_at"] or ""))

    def one_process(self, shard=None, positions=None):
        """The build as one process makes it (of a shard: `shard` as open_writer takes it, the
        writer keeping the shard's rows of the whole split's chunks, or given the shard's own
        samples only, read at `positions`): its report."""
        writer, kinds = None, {}
        try:
            seen = 0
            loader = self.loader if positions is None else self.loader_at(positions)
            if positions is not None:
                self.bar.total = len(positions)  # the shard's samples are all it reads
            for batch in loader:
                inputs, labels = _inputs.checked_batch(batch, _inputs.batch_start(positions, seen),
                                                       kinds)
                seen += len(inputs)
                if writer is None:
                    writer = self.open_writer(inputs, shard)
                rows = self.add_chunk(writer, inputs, labels)
                outputs, lengths = [], []
                if rows:
                    named, lengths = self.outputs_of(inputs, rows)
                    outputs = _records.arranged(named, self.layout)
                writer.write_chunk(outputs, lengths)
                self.bar.advance(len(inputs))
            if writer is None:
                raise ValueError("data gave no batches")
            if positions is not None:
                writer.skip_other_shards(shard[3] - shard[2])
            report = json.loads(writer.finish())
            report["prefix_seconds"] = self.prefix_seconds
            self.bar.finish()
            return report
        finally:
            if writer is not None:
                writer.close()  # the cache's writer lock, released now whatever happened

    def sharded(self, rank, world):
        """This rank's shard built into its own cache (sharded=True): the job's report."""
        o = self.o
        facts = {"model": self.model, "fingerprint": self.fingerprint,
                 "preprocess": self.preprocessing, "keyer": self.keyer_spec, "codec": o["codec"],
                 "split": o["split"], "classes": self.class_names}
        # rebuild=True: every rank checks that its cache may be deleted before any deletes.
        check = (lambda: _native.check_rebuild(self.path)) if o["rebuild"] else None
        where = _ranks.location_of(self.path)
        if self.loader_at is None or o["keyer"] == "id":  # the whole split, read twice
            def key_pass():
                return _ranks.shard_of_split(self.loader, self.keyer_of, rank, world, facts,
                                             check, where)
        else:  # 1/world of the split to key, then the shard's samples
            def key_pass():
                return _ranks.shard_of_parts(self.loader_at, self.n, self.keyer_of, rank, world,
                                             facts, check, where)
        return _ranks.build_sharded(key_pass, self.one_process, rank, world)
