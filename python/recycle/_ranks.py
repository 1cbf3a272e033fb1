"""recycle.build under torch.distributed: rank 0 writing what every rank computes, or every rank
building its own shard (sharded=True), with errors sent so that every rank stops with the same
one."""
import json
import os

import torch

from . import _inputs, _native, _records, _tensors


def error_of(e):
    """An exception as the message a rank sends the others."""
    return ("error", type(e).__name__, str(e))


def raise_sent(message):
    """Raises the error of a message of error_of's, of its kind where the package has it."""
    kind = {"StaleCacheError": _native.StaleCacheError, "ValueError": ValueError,
            "CorruptRecordError": _native.CorruptRecordError}.get(message[1], RuntimeError)
    raise kind(message[2])


def _sent(message):
    """Rank 0's `message` on every rank (broadcast); raises it on every rank when it is an
    error (error_of's)."""
    box = [message]
    torch.distributed.broadcast_object_list(box, src=0)
    if box[0][0] == "error":
        raise_sent(box[0])
    return box[0]


def _merged(parts, rows, layout, world):
    """The records' tensors and lengths of a chunk's rows `rows` from each rank's part (rank r
    computed rows r, r + world, ...: its named outputs and their lengths), in the rows' order,
    each arranged by name as the layout; sequences padded to the chunk's longest."""
    outputs, lengths = [], []
    if not rows:
        return outputs, lengths
    order = torch.cat([torch.arange(len(rows))[r::world] for r in range(world)
                       if len(rows[r::world])])
    given = [(_records.arranged(p[0], layout), p[1]) for p in parts if p is not None]
    for j in range(len(given[0][0])):
        # each rank's records padded to its own longest: to the chunk's
        stacked = _tensors.stacked([row for g in given for row in g[0][j]])
        out = torch.empty_like(stacked)
        out[order] = stacked
        outputs.append(out)
    cut = [length for g in given for length in g[1]]
    if cut:
        lengths = [0] * len(cut)
        for i, o in enumerate(order.tolist()):
            lengths[o] = cut[i]
    return outputs, lengths


def _last_message(writer, failure):
    """Rank 0's message at the end: the first failure, or the writer's report."""
    try:
        if failure is not None:
            return failure
        if writer is None:
            return ("error", "ValueError", "data gave no batches")
        return ("done", json.loads(writer.finish()))
    except Exception as e:
        return error_of(e)


def build_distributed(loader, outputs_of, add_chunk, open_writer, layout, rank, world, bar):
    """The build under an initialised torch.distributed group: every rank reads the same data
    in the same order; rank 0 keys each chunk (add_chunk) and says which rows need the prefix;
    rank r computes rows r, r + world, ... (outputs_of: named outputs and, for records as long
    as the text, their lengths); rank 0 gathers them (each rank's arranged by name as the record
    layout, which open_writer fills on rank 0; sequences padded to the chunk's longest) and
    writes the cache (its only writer, as in recycle-build's distributed build). Each step
    starts with a message from rank 0, so an error anywhere stops every rank at the next step
    with the same message."""
    writer = None
    failure = None  # (kind, message) of an error on this rank, sent at the next step
    start, kinds = 0, {}
    try:
        for batch in loader:
            inputs, labels = _inputs.checked_batch(batch, start, kinds)
            start += len(inputs)
            message = None
            if rank == 0:
                message = failure
                if failure is None:
                    try:
                        if writer is None:
                            writer = open_writer(inputs)
                        message = ("rows", add_chunk(writer, inputs, labels))
                    except Exception as e:  # every rank stops with it
                        message = error_of(e)
            rows = _sent(message)[1]
            mine = rows[rank::world]
            try:
                part = list(outputs_of(inputs, mine)) if mine else None  # a tuple is an error
            except Exception as e:
                part = error_of(e)
            parts = [None] * world if rank == 0 else None
            torch.distributed.gather_object(part, parts, dst=0)
            if rank == 0 and failure is None:
                failed = [p for p in parts if isinstance(p, tuple)]  # error_of's
                try:
                    if failed:
                        failure = failed[0]
                    else:
                        writer.write_chunk(*_merged(parts, rows, layout, world))
                except Exception as e:
                    failure = error_of(e)
            bar.advance(len(inputs))
        report = _sent(_last_message(writer, failure) if rank == 0 else None)[1]
        report["ranks"] = world
        bar.finish()
        return report
    finally:
        if writer is not None:
            writer.close()


def gathered(value, world):
    """Every rank's `value`, in rank order (all_gather_object; [value] without a group)."""
    if world == 1:
        return [value]
    out = [None] * world
    torch.distributed.all_gather_object(out, value)
    return out


def exchanged(own, world):
    """Every rank's `own` (a message, or error_of's), in rank order; raises on every rank when
    any rank failed: this rank's error, else the first rank's that did."""
    every = gathered(own, world)
    failed = [m for m in every if m[0] == "error"]
    if failed:
        raise_sent(own if own[0] == "error" else failed[0])
    return every


def location_of(path):
    """Where the cache directory `path` is, as a text equal for two paths of one directory on one
    machine: the engine's cache_location."""
    return _native.cache_location(os.fspath(path))


def _rows_keyed(batch, seen, kinds, keyer_of, world):
    """A batch's (labels, each row's shard of world, the rows' keys: 16 bytes each) as a sharded
    CacheWriter keys them; `seen` as checked_batch takes it."""
    inputs, labels = _inputs.checked_batch(batch, seen, kinds)
    if isinstance(inputs, _inputs.Texts):
        shards, keys = _native.shards_of_texts(keyer_of(inputs), list(inputs), int(seen), world)
    elif isinstance(inputs, _inputs.Named):
        shards, keys = _native.shards_of_named(keyer_of(inputs), list(inputs), int(seen), world)
    else:
        shards, keys = _native.shards_of_rows(keyer_of(inputs), inputs, int(seen), world)
    return labels.to(torch.int64).tolist(), shards, keys


def _agreed(every, world, samples, counts):
    """Checks the ranks' messages of a key pass (each: (kind, facts, ..., where)) as every rank
    does: the same facts, one directory each, and no empty shard by `counts` (each shard's
    samples) (ValueError)."""
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
    for r in range(world):
        if counts[r] == 0:
            raise ValueError(f"shard {r} of {world} would hold none of the split's {samples} "
                             "samples: build with fewer ranks")


def shard_of_split(loader, keyer_of, rank, world, facts, check=None, where=None):
    """The key pass of a sharded build over the whole split: keys every sample of `loader` (in
    order) as the writer will (keyer_of(inputs): the keyer spec of a batch's inputs), and checks
    with every rank that they key the same samples with the same labels and build the same cache
    (`facts`: the identity and options). Returns (the split's samples, this rank's shard's,
    None: the shard's samples are read from the whole split). Every rank raises the same
    one-line ValueError when they differ or a shard would be empty; an error on one rank is
    raised on every rank. `check` (optional) runs first on every rank (rebuild=True's: this
    rank's cache may be deleted), so that no rank goes on, and deletes, when another's fails.
    `where` is this rank's cache directory (location_of): two ranks given one are refused."""
    seen, counts, kinds = 0, [0] * world, {}
    digest = _native.KeysDigest()  # the engine's ranks compare the same digest
    try:
        if check is not None:
            check()
        for batch in loader:
            labels, shards, keys = _rows_keyed(batch, seen, kinds, keyer_of, world)
            digest.add(keys, labels)
            for s in shards:
                counts[s] += 1
            seen += len(labels)
        if seen == 0:
            raise ValueError("data gave no batches")
        mine = ("facts", dict(facts, samples=seen, data=digest.hexdigest()), None, where)
    except Exception as e:  # every rank stops with it
        mine = error_of(e)
    _agreed(exchanged(mine, world), world, seen, counts)
    return seen, counts[rank], None


def shard_of_parts(loader_at, n, keyer_of, rank, world, facts, check=None, where=None):
    """The key pass of a sharded build that reads 1/world of the split: this rank keys its part
    (the samples p with p % world == rank, read by loader_at(positions)) and the engine's spot
    checks of the other parts' (_native.sharded_key_positions); the ranks exchange their parts' keys, labels and shards, and each
    checks its spot checks against the keys their owners sent (ranks given different data are
    refused, unless no spot check falls on a difference). Returns (n, this rank's shard's
    samples, their positions, ascending); errors, check and where as shard_of_split's."""
    read = _native.sharded_key_positions(n, rank, world)
    kinds, keys, labels, shards, spots = {}, [], [], [], {}
    try:
        if check is not None:
            check()
        seen = 0
        for batch in loader_at(read):
            got = _rows_keyed(batch, _inputs.batch_start(read, seen), kinds, keyer_of, world)
            for j, (label, shard) in enumerate(zip(got[0], got[1])):
                p, key = read[seen + j], got[2][16 * j:16 * j + 16]
                if p % world != rank:
                    spots[p] = key
                    continue
                keys.append(key)
                labels.append(label)
                shards.append(shard)
            seen += len(got[0])
        mine = ("part", dict(facts, samples=n), None, where, b"".join(keys), labels, shards)
    except Exception as e:  # every rank stops with it
        mine = error_of(e)
    every = exchanged(mine, world)
    _agreed(every, world, n, [1] * world)  # the same samples: then each part is whole
    shard_of = [0] * n
    for q, message in enumerate(every):
        shard_of[q::world] = message[6]
    counts = [shard_of.count(r) for r in range(world)]
    _agreed(every, world, n, counts)
    exchanged(_spot_check(spots, every, rank, world), world)
    return n, counts[rank], [p for p in range(n) if shard_of[p] == rank]


def _spot_check(spots, every, rank, world):
    """("ok",), or error_of the first of this rank's spot checks whose key is not the one its
    owner sent."""
    for p, key in sorted(spots.items()):
        q, j = p % world, p // world
        if every[q][4][16 * j:16 * j + 16] != key:
            return error_of(ValueError(
                f"sample {p} of data is not the same on rank {q} as on rank {rank} (its content "
                "key differs): every rank must call build with the same data in the same order"))
    return ("ok",)


def build_sharded(key_pass, one_process, rank, world):
    """The build with sharded=True: the key pass (key_pass(): shard_of_split's or
    shard_of_parts' result), then this rank builds its own shard into its own cache as one
    process does (one_process(shard, positions): the shard's samples read at `positions`, or
    from the whole split's chunks when None, the writer keeping the shard's rows). No rank waits
    for another until the end, where the reports (or an error: raised on every rank) are
    exchanged. Returns the job's report: the shards' counts added up, each rank's own under
    per_shard."""
    n, mine, positions = key_pass()
    try:
        own = ("report", one_process((rank, world, mine, n), positions))
    except Exception as e:
        own = error_of(e)
    shards = [m[1] for m in exchanged(own, world)]
    # The engine's merge, as recycle-build --sharded's rank 0 makes it.
    return json.loads(_native.merged_shard_reports([json.dumps(s) for s in shards], rank))
