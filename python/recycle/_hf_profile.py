"""recycle.hf.profile: which k to cache, from the measured cost of each layer on the user's texts.

    table = recycle.hf.profile(model, tokenizer, texts, batch_size=16, max_length=128)

times, on batches of the user's own texts (padded to each batch's longest, as training pads
them), the embeddings and each layer alone: its forward under no_grad (what the online prefix
spends on it every step) and its forward and backward (what training it spends). For each k
from 0 to the layer count it predicts, per step:

    full fine-tuning   embeddings and every layer, forward and backward, and their AdamW step
    online prefix      embeddings and layers 0..k-1 forward only, layers k.. forward and backward
                       and their AdamW step
    cached (recycle)   layers k.. forward and backward and their AdamW step (the records' read
                       is not counted)

and gives the head epoch's speedup against each, with the cache's size for these texts as
records as long as each text (the hidden states in `codec`, and the int64 mask). Every row
counts the pooling and a new two-class classifier, trained, on top (all a head of k = the layer
count does); none counts reading the records or batching. The optimizer's step is timed on
copies of each layer's parameters (AdamW, the state already made), so it grows with the
parameters trained, not with the batch (all-mpnet-base-v2's layers: 6 to 11% of a full step of
16 short texts on one core; its embeddings, 23M parameters, come on top)."""
import time

import torch

from . import _hf_layers

_VALUE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}


def _median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def _layer_costs(base, layers, batch, repeats):
    """(embeddings forward seconds, embeddings forward+backward seconds, [(forward, forward and
    backward) seconds of each layer]) on one batch: each layer run alone on the hidden states the
    model gives it, with the arguments the model gives it."""
    mask = batch["attention_mask"]
    arguments = _hf_layers.LayerArguments(base, layers)(mask)
    with torch.no_grad():
        handle = _hf_layers.stop_at(layers[0])
        try:
            base(**batch)
            raise RuntimeError("recycle.hf.profile: the model's forward did not reach its layers")
        except _hf_layers.Stop as stop:
            hidden = stop.args[0] if stop.args else stop.kwargs["hidden_states"]
        finally:
            handle.remove()

    def embeddings(grad):
        def run():
            with torch.set_grad_enabled(grad):
                handle = _hf_layers.stop_at(layers[0])
                try:
                    base(**batch)
                except _hf_layers.Stop as stop:
                    out = stop.args[0] if stop.args else stop.kwargs["hidden_states"]
                finally:
                    handle.remove()
                if grad and out.requires_grad:  # frozen embeddings: forward only
                    out.float().sum().backward()
        return run

    def call(layer, x, args, kwargs):
        out = layer(x, *args[1:], **kwargs) if args else layer(**dict(kwargs, hidden_states=x))
        return out[0] if isinstance(out, tuple) else out

    costs = []
    for layer, (args, kwargs) in zip(layers, arguments):
        x = hidden.detach()

        def forward():
            with torch.no_grad():
                call(layer, x, args, kwargs)

        def train():
            xg = x.clone().requires_grad_(True)
            call(layer, xg, args, kwargs).float().sum().backward()

        forward()  # warm up
        costs.append((_median_seconds(forward, repeats), _median_seconds(train, repeats)))
        with torch.no_grad():
            hidden = call(layer, x, args, kwargs)
    # The pooling and a new two-class classifier on the last layer's output, trained.
    classifier = torch.nn.Linear(hidden.shape[-1], 2).to(hidden.device, hidden.dtype)
    m = mask.unsqueeze(-1).to(hidden.dtype)

    def top():
        xg = hidden.detach().clone().requires_grad_(True)
        classifier((xg * m).sum(1) / m.sum(1).clamp(min=1e-9)).float().sum().backward()

    top_fb = _median_seconds(top, repeats)
    return _median_seconds(embeddings(False), repeats), _median_seconds(embeddings(True), repeats), \
        costs, top_fb


def _step_seconds(params, repeats):
    """The median seconds of AdamW's step over copies of `params` with gradients (the user's
    weights are not touched), after one step that makes the optimizer's state."""
    copies = [p.detach().clone().requires_grad_(True) for p in params]
    if not copies:
        return 0.0
    for c in copies:
        c.grad = torch.zeros_like(c)
    opt = torch.optim.AdamW(copies)
    opt.step()
    return _median_seconds(opt.step, repeats)


def _optimizer_costs(base, layers, width, repeats):
    """(the embeddings' step, [each layer's step], a new two-class classifier's step): AdamW
    over what full fine-tuning trains outside the layers (the base's parameters but a pooler's),
    over each layer's, and over the classifier's."""
    in_layers = {id(p) for p in layers.parameters()}
    rest = [p for n, p in base.named_parameters()
            if id(p) not in in_layers and not n.startswith("pooler.") and p.requires_grad]
    device = next(base.parameters()).device
    top = list(torch.nn.Linear(width, 2).to(device).parameters())
    return (_step_seconds(rest, repeats),
            [_step_seconds([p for p in layer.parameters() if p.requires_grad], repeats)
             for layer in layers],
            _step_seconds(top, repeats))


def profile(model, tokenizer, texts, batch_size=16, max_length=128, batches=2, repeats=3,
            codec="fp16", file=None):
    """The predicted cost of caching k layers, for every k, measured on `batches` batches of
    `texts` (the module's docstring). Returns a list of dicts, one per k: k, full_s, online_s,
    cached_s (seconds of a step of batch_size texts), optimizer_s (the cached step's AdamW
    share), vs_full and vs_online (the head epoch's speedup against each: full_s / cached_s,
    online_s / cached_s), cache_bytes (the records of all `texts`). Prints the table to `file`
    (sys.stdout when None; False: nothing)."""
    model, _, _ = _hf_layers.sentence_transformer(model, None)
    base, _, layers = _hf_layers.base_and_layers(model)
    texts = list(texts)
    if not texts:
        raise ValueError("recycle.hf.profile: give it some of your texts to time the layers on")
    if codec not in _VALUE_BYTES:
        raise ValueError(f"codec must be one of {', '.join(_VALUE_BYTES)}, not {codec!r}")
    training = base.training
    grads = {p: p.grad for p in base.parameters()}  # the user's, given back as they were
    base.eval()  # no dropout: the same work, less noise
    try:
        runs = []
        for b in range(batches):
            chunk = texts[b * batch_size:(b + 1) * batch_size] or texts[:batch_size]
            batch = tokenizer(chunk, padding=True, truncation=True, max_length=max_length,
                              return_tensors="pt")
            device = next(base.parameters()).device
            batch = {n: t.to(device) for n, t in batch.items()}
            scale = batch_size / len(chunk)
            emb_f, emb_fb, costs, top_fb = _layer_costs(base, layers, batch, repeats)
            runs.append((emb_f * scale, emb_fb * scale, [(f * scale, fb * scale) for f, fb in costs],
                         top_fb * scale))
    finally:
        base.train(training)
        for p, g in grads.items():
            p.grad = g
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    emb_f = mean([r[0] for r in runs])
    emb_fb = mean([r[1] for r in runs])
    f = [mean([r[2][i][0] for r in runs]) for i in range(len(layers))]
    fb = [mean([r[2][i][1] for r in runs]) for i in range(len(layers))]
    top = mean([r[3] for r in runs])
    # The records: each text's tokens, the hidden states in the codec and the int64 mask.
    tokens = sum(len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)
                 ["input_ids"])
    width = base.config.hidden_size if hasattr(base.config, "hidden_size") else base.config.dim
    cache_bytes = tokens * (width * _VALUE_BYTES[codec] + 8)
    emb_step, steps, top_step = _optimizer_costs(base, layers, width, repeats)
    table = []
    full = emb_fb + sum(fb) + top + emb_step + sum(steps) + top_step
    for k in range(len(layers) + 1):
        optimizer = sum(steps[k:]) + top_step
        cached = sum(fb[k:]) + top + optimizer
        online = emb_f + sum(f[:k]) + cached
        table.append({"k": k, "full_s": full, "online_s": online, "cached_s": cached,
                      "optimizer_s": optimizer, "vs_full": full / cached,
                      "vs_online": online / cached, "cache_bytes": cache_bytes})
    if file is not False:
        _print(table, len(texts), batch_size, file)
    return table


def _print(table, n, batch_size, file):
    import sys
    out = file or sys.stdout
    print(f"recycle.hf.profile: predicted step seconds (batch {batch_size}) and head-epoch speedup "
          f"by k, cache of {n} texts", file=out)
    print(f"{'k':>3} {'full s':>9} {'online s':>9} {'cached s':>9} {'vs full':>8} "
          f"{'vs online':>9} {'cache MB':>9}", file=out)
    for row in table:
        print(f"{row['k']:>3} {row['full_s']:>9.4f} {row['online_s']:>9.4f} {row['cached_s']:>9.4f} "
              f"{row['vs_full']:>7.2f}x {row['vs_online']:>8.2f}x "
              f"{row['cache_bytes'] / 1e6:>9.2f}", file=out)
