#!/usr/bin/python3
"""The PyTorch DistributedDataParallel peer of recycle-bench --nproc: what a user would write
instead of `recycle-train --cache DIR --nproc N`.

It starts N worker processes of itself on this machine (127.0.0.1 only, as torchrun would:
MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE in their environment), and each worker:

  1. reads the same Fashion-MNIST samples as eager_peer.py (its data and model code are
     imported from there, not copied), builds the same width-16 ResNet-18 with the same seed,
     and runs the frozen prefix (first 4 of 8 blocks, ratio 0.5) once over every sample under
     torch.no_grad(), keeping the activations in memory (outside any timing);
  2. joins a Gloo process group (torch.distributed, init from the environment);
  3. trains the head (layer3.0..layer4.1 + classifier) from those activations for --epochs
     epochs with torch.nn.parallel.DistributedDataParallel (or, with --sync average:K, plain
     local SGD whose parameters are averaged every K steps by torch's PeriodicModelAverager);
  4. optionally (--full) also trains the whole model from the images the same way.

Sharding is DistributedSampler's, and the engine's (engine/data/sampler.h): one permutation
of all samples per epoch from a generator seeded with seed * 1000003 + epoch, padded with its
own first samples to a multiple of the world size; rank r takes positions r, r + W, ...
The step is eager_peer's: cosine learning rate per step (over the per-rank steps), zero_grad,
forward, cross-entropy, backward (DDP averages the gradients), SGD step (lr 0.05, Nesterov
momentum 0.9, weight decay 5e-4), loss.item() and an argmax accuracy count.

Run with Debian's interpreter: /usr/bin/python3 bench/peers/ddp_peer.py --nproc 2 [options]
The launcher's last line of stdout is rank 0's JSON object (see bench/peers/README.md).
Errors: one line on stderr, exit status 1 (argparse usage errors: exit status 2).
"""

import argparse
import datetime
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eager_peer  # noqa: E402  (same directory: data, model and errors are shared)
from eager_peer import PeerError  # noqa: E402

PROG = "ddp_peer"


# ---- options --------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="ddp_peer.py",
        description="PyTorch DDP peer for recycle-bench --nproc: starts N local Gloo workers that "
                    "train the 0.5 head of the engine's width-16 ResNet-18 from in-memory "
                    "activations (and optionally the whole model). Prints rank 0's JSON object "
                    "as the last line of stdout.")
    parser.add_argument("--nproc", type=int, default=2, help="worker processes (world size, default: 2)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads per rank; 0 = the cores divided by --nproc, at least 1 (default: 0)")
    parser.add_argument("--batch", type=int, default=128, help="samples per step on each rank (default: 128)")
    parser.add_argument("--classes", default="5-9",
                        help="classes to keep, relabelled 0..k-1 in order (default: 5-9)")
    parser.add_argument("--limit", type=int, default=5000,
                        help="first N samples of the train split after --classes, 0 = all (default: 5000)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of head (and full) training (default: 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and shuffling (default: 0)")
    parser.add_argument("--grad-compression", choices=["none", "fp16"], default="none",
                        help="none: DDP's fp32 allreduce; fp16: DDP's fp16_compress_hook (default: none)")
    parser.add_argument("--sync", default="allreduce",
                        help="allreduce (DDP, every step) or average:K (local SGD, parameters "
                             "averaged every K steps; default: allreduce)")
    parser.add_argument("--bucket-mb", type=float, default=25.0,
                        help="DDP's bucket_cap_mb (default: 25, DDP's own default)")
    parser.add_argument("--broadcast-buffers", action="store_true",
                        help="DDP's broadcast_buffers=True (BatchNorm buffers sent from rank 0 at every "
                             "forward); by default they are broadcast once, at the start, as the engine does")
    parser.add_argument("--full", action="store_true",
                        help="also train the whole model from the images (full fine-tuning, DDP)")
    parser.add_argument("--timeout", type=int, default=60,
                        help="seconds a collective may wait before the job fails (default: 60)")
    parser.add_argument("--data-dir", default=eager_peer.DEFAULT_DATA_DIR,
                        help="directory of the Fashion-MNIST IDX .gz files (default: %s)"
                             % eager_peer.DEFAULT_DATA_DIR)
    # Set by the launcher for its workers only.
    parser.add_argument("--worker-rank", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.nproc < 1:
        raise PeerError("--nproc must be at least 1")
    if args.threads < 0:
        raise PeerError("--threads must be 0 (cores / nproc) or positive")
    for name in ("batch", "epochs", "timeout"):
        if getattr(args, name) < 1:
            raise PeerError("--%s must be at least 1" % name)
    if args.limit < 0:
        raise PeerError("--limit must be 0 (all) or positive")
    if args.seed < 0:
        raise PeerError("--seed must be 0 or positive")
    if not args.bucket_mb > 0:
        raise PeerError("--bucket-mb must be positive")
    args.average_every = 0
    if args.sync != "allreduce":
        prefix, _, k = args.sync.partition(":")
        if prefix != "average" or not k.isdigit() or int(k) < 1:
            raise PeerError("--sync '%s': expected allreduce or average:K with K >= 1" % args.sync)
        args.average_every = int(k)
        if args.grad_compression != "none":
            raise PeerError("--sync average:K averages parameters in fp32; it takes no --grad-compression")
    args.class_list = eager_peer.parse_classes(args.classes)
    if args.threads == 0:
        args.threads = max(1, (os.cpu_count() or 1) // args.nproc)
    return args


# ---- launcher -------------------------------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_error_line(path):
    """The worker's own error line if it wrote one, else its last non-empty stderr line."""
    try:
        with open(path, errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return ""
    for l in reversed(lines):
        if l.startswith(PROG + ": error:"):
            return l[len(PROG + ": error:"):].strip()
        if l.startswith(PROG + ":"):
            return l[len(PROG) + 1:].strip()
    return lines[-1] if lines else ""


def launch(args, argv):
    """Starts args.nproc workers, waits for all of them, relays rank 0's JSON line. When one
    fails, stops the others and raises one line naming it."""
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="ddp_peer.")
    workers = []
    stopping = []

    def stop(signum, _frame):
        stopping.append(signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for rank in range(args.nproc):
            env = dict(os.environ)
            env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                        "WORLD_SIZE": str(args.nproc), "OMP_NUM_THREADS": str(args.threads)})
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            out = open(os.path.join(tmp, "rank%d.stdout" % rank), "w")
            err = open(os.path.join(tmp, "rank%d.stderr" % rank), "w")
            cmd = [sys.executable, os.path.abspath(__file__)] + argv + ["--worker-rank", str(rank)]
            workers.append((subprocess.Popen(cmd, env=env, stdout=out, stderr=err), out, err))
        failed = None
        while not stopping:
            codes = [p.poll() for p, _, _ in workers]
            bad = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                failed = bad[0]
                break
            if all(c == 0 for c in codes):
                break
            time.sleep(0.05)
        if failed is not None or stopping:
            for p, _, _ in workers:
                if p.poll() is None:
                    p.terminate()
            deadline = time.monotonic() + 10
            for p, _, _ in workers:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if stopping:
                raise KeyboardInterrupt
            code = workers[failed][0].returncode
            how = ("exited with status %d" % code) if code > 0 else ("was killed by signal %d" % -code)
            why = last_error_line(os.path.join(tmp, "rank%d.stderr" % failed))
            raise PeerError("rank %d of %d %s%s" % (failed, args.nproc, how, (": " + why) if why else ""))
        with open(os.path.join(tmp, "rank0.stdout")) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        if not lines:
            raise PeerError("rank 0 printed no JSON line")
        print(lines[-1])
        return 0
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for p, out, err in workers:
            if p.poll() is None:
                p.kill()
                p.wait()
            out.close()
            err.close()
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)


# ---- worker ---------------------------------------------------------------------------------

def trainable_numel(module):
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def rank_order(torch, n, world, rank, seed, epoch):
    """This rank's sample indices for `epoch` (DistributedSampler semantics, see the top)."""
    gen = torch.Generator()
    gen.manual_seed(seed * 1000003 + epoch)
    order = torch.randperm(n, generator=gen)
    per_rank = (n + world - 1) // world
    if per_rank * world > n:
        order = torch.cat([order, order[:per_rank * world - n]])
    return order[rank::world]


def train_dp(torch, dist, module, inputs, labels, args, rank, world, lr=0.05):
    """Data-parallel training of `module` on inputs [n, ...] / labels [n] (every rank holds all
    of them and reads its shard). Returns (this rank's epoch seconds, (loss, acc) of the last
    epoch over all ranks)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    averager = None
    if args.average_every > 0 and world > 1:
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.data, src=0)  # what DDP's constructor does: rank 0's state everywhere
        model = module
        averager = PeriodicModelAverager(period=args.average_every, warmup_steps=0)
    elif world > 1:
        model = DDP(module, bucket_cap_mb=args.bucket_mb, broadcast_buffers=args.broadcast_buffers)
        if args.grad_compression == "fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    else:
        model = module
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    loss_fn = torch.nn.functional.cross_entropy
    n = inputs.shape[0]
    per_rank = (n + world - 1) // world
    steps_per_epoch = (per_rank + args.batch - 1) // args.batch
    total = steps_per_epoch * args.epochs
    step = 0
    seconds = []
    sums = None
    model.train()
    for epoch in range(args.epochs):
        if world > 1:
            dist.barrier()  # every rank starts the epoch's clock together (outside the timing)
        start = time.perf_counter()
        order = rank_order(torch, n, world, rank, args.seed, epoch)
        loss_sum, correct, seen = 0.0, 0, 0
        for b in range(0, per_rank, args.batch):
            idx = order[b:b + args.batch]
            x = inputs.index_select(0, idx)
            y = labels.index_select(0, idx)
            cur_lr = 0.5 * lr * (1.0 + math.cos(math.pi * step / total))
            step += 1
            for g in opt.param_groups:
                g["lr"] = cur_lr
            opt.zero_grad()
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            opt.step()
            if averager is not None:
                averager.average_parameters(params)
            k = y.shape[0]
            loss_sum += loss.item() * k
            correct += int(logits.argmax(1).eq(y).sum().item())
            seen += k
        seconds.append(time.perf_counter() - start)
        sums = (loss_sum, correct, seen)
    totals = torch.tensor(sums, dtype=torch.float64)
    if world > 1:
        dist.all_reduce(totals)
    return seconds, (float(totals[0] / totals[2]), float(totals[1] / totals[2]))


def epoch_seconds_over_ranks(torch, dist, seconds, world):
    """Per epoch, the slowest rank's seconds (an epoch ends when every rank has finished it)."""
    t = torch.tensor(seconds, dtype=torch.float64)
    if world > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def worker(args):
    import torch
    import torch.distributed as dist

    rank = args.worker_rank
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.set_num_threads(args.threads)
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=args.timeout))

    images, labels_np = eager_peer.load_train_split(args.data_dir, args.class_list, args.limit)
    n = int(images.shape[0])
    if n < world:
        raise PeerError("%d samples cannot be shared by %d ranks" % (n, world))
    x_all = (torch.from_numpy(images.copy()).unsqueeze(1).float()
             .div_(255.0).sub_(eager_peer.PIXEL_MEAN).div_(eager_peer.PIXEL_STD))
    y_all = torch.from_numpy(labels_np.copy()).long()
    k = len(args.class_list)

    # Bytes of fp32 gradients per step for full fine-tuning (every parameter trains).
    torch.manual_seed(args.seed)
    blocks, classifier = eager_peer.build_model(torch, eager_peer.WIDTH, k)
    full_model = torch.nn.Sequential(*[b for _, b in blocks], classifier)
    full_numel = trainable_numel(full_model)

    result = {"peer": "pytorch-ddp", "backend": "gloo", "world_size": world,
              "threads_per_rank": args.threads, "batch_per_rank": args.batch,
              "samples": n, "samples_per_rank": (n + world - 1) // world,
              "steps_per_epoch": ((n + world - 1) // world + args.batch - 1) // args.batch,
              "epochs": args.epochs, "seed": args.seed, "classes": args.classes,
              "grad_compression": args.grad_compression, "sync": args.sync,
              "bucket_mb": args.bucket_mb, "broadcast_buffers": args.broadcast_buffers,
              "torch_version": torch.__version__, "ratio": eager_peer.RATIO,
              "full_trainable_params": full_numel, "full_fp32_bytes_per_step": full_numel * 4}

    if args.full:
        secs, (loss, acc) = train_dp(torch, dist, full_model, x_all, y_all, args, rank, world)
        secs = epoch_seconds_over_ranks(torch, dist, secs, world)
        result.update({"full_epoch_seconds": [round(s, 4) for s in secs],
                       "full_samples_per_s": round(n / statistics.median(secs), 1),
                       "full_final_loss": round(loss, 4), "full_final_train_acc": round(acc, 4)})
    del full_model

    # The frozen prefix once over every sample (no timing shared with training), then the head.
    torch.manual_seed(args.seed)
    blocks, classifier = eager_peer.build_model(torch, eager_peer.WIDTH, k)
    split = int(round(eager_peer.RATIO * len(blocks)))
    prefix = torch.nn.Sequential(*[b for _, b in blocks[:split]])
    head = torch.nn.Sequential(*[b for _, b in blocks[split:]], classifier)
    prefix.eval()
    for p in prefix.parameters():
        p.requires_grad_(False)
    start = time.perf_counter()
    with torch.no_grad():
        acts = torch.cat([prefix(x_all[b:b + eager_peer.PREFIX_BATCH])
                          for b in range(0, n, eager_peer.PREFIX_BATCH)])
    prefix_seconds = time.perf_counter() - start

    # As the engine counts them: bytes handed to collectives per rank per step, and what fp32
    # would have taken for the same payload (so average:K, which sends fp32 parameters once every
    # K steps, has a compression ratio of 1 and a K-th of allreduce's bytes).
    head_numel = trainable_numel(head)
    if args.average_every > 0:
        sent = fp32_bytes = head_numel * 4 / args.average_every
    elif args.grad_compression == "fp16":
        sent, fp32_bytes = head_numel * 2, head_numel * 4
    else:
        sent = fp32_bytes = head_numel * 4
    secs, (loss, acc) = train_dp(torch, dist, head, acts, y_all, args, rank, world)
    secs = epoch_seconds_over_ranks(torch, dist, secs, world)
    head_median = statistics.median(secs)
    result.update({
        "split_at": blocks[split - 1][0],
        "activation_shape": list(acts.shape[1:]),
        "prefix_seconds": round(prefix_seconds, 4),
        "head_trainable_params": head_numel,
        "head_epoch_seconds": [round(s, 4) for s in secs],
        "head_samples_per_s": round(n / head_median, 1),
        "head_final_loss": round(loss, 4),
        "head_final_train_acc": round(acc, 4),
        "fp32_bytes_per_step": round(fp32_bytes, 1),
        "bytes_per_step": round(sent, 1),
        "compression_ratio": round(fp32_bytes / sent, 3),
    })
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(result))
    return 0


def main(argv):
    args = parse_args(argv)
    if args.worker_rank >= 0:
        return worker(args)
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        raise PeerError("%s needs numpy and torch (Debian: apt-get install python3-torch): %s"
                        % (sys.executable, e))
    return launch(args, argv)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except PeerError as e:
        print(PROG + ": error: " + str(e), file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print(PROG + ": interrupted", file=sys.stderr)
        sys.exit(1)
    except (RuntimeError, MemoryError, OSError) as e:
        line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(PROG + ": error: " + line, file=sys.stderr)
        sys.exit(1)
