"""recycle.export (recycle.pt2): a module as the AOTInductor package (.pt2) the tools take.

    recycle.export(prefix, (x,), "prefix.pt2")        # recycle-build --model pt2:prefix.pt2
    recycle.export(hf_prefix, tokenizer(texts, padding=True, return_tensors="pt"), "text.pt2",
                   dynamic_length=True)               # recycle.hf.split's prefix, token ids in
    recycle.export(head, (a,), "head.pt2", cache="c")  # recycle-predict --cache c --head head.pt2

torch.export.export with a dynamic batch (and with dynamic_length, a dynamic second dimension
shared by every input: a text prefix's sequence length), then AOTInductor's
aoti_compile_and_package. The package's metadata carries what the tools check:
"recycle.weights", the XXH3-128 of the module's parameters and buffers (the fingerprint
recycle.build records for the same module), so that a re-export of the same weights is the same
cache and other weights are refused as stale; and with cache=DIR, "recycle.head", the identity of
the cache a head was trained from, which recycle-predict compares with the cache it serves.
Needs torch >= 2.6 (docs/pytorch2.md).
"""
import os

import torch

from . import _native


def _as_tuple(example_inputs):
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    inputs = tuple(example_inputs)
    if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise ValueError("example_inputs must be a tensor or a non-empty tuple of tensors")
    return inputs


def _dynamic_shapes(inputs, dynamic_batch, dynamic_length, max_length=None):
    batch = torch.export.Dim("batch", min=1) if dynamic_batch else None
    length = None
    if dynamic_length:
        length = (torch.export.Dim("length", min=2, max=max_length) if max_length
                  else torch.export.Dim("length", min=1))
    shapes = []
    for t in inputs:
        dims = {}
        if batch is not None and t.dim() >= 1:
            dims[0] = batch
        if length is not None and t.dim() >= 2:
            dims[1] = length
        shapes.append(dims)
    return tuple(shapes)


def _text_prefix(module, example_inputs):
    """For recycle.hf.split's prefix: (the module torch.export traces, its example inputs, the
    longest length the model's positions allow or None), checked to compute what the prefix
    does, bit for bit, on the example batch (a tokenizer's output: a dict with input_ids and
    attention_mask). None for any other module."""
    from . import hf
    if not isinstance(module, hf.Prefix):
        return None
    if not hasattr(example_inputs, "keys") or "input_ids" not in example_inputs or \
            "attention_mask" not in example_inputs:
        raise ValueError("a recycle.hf prefix is exported from a tokenizer's output: a dict with "
                         "input_ids and attention_mask (return_tensors=\"pt\")")
    traced = module.for_export().eval()
    inputs = (example_inputs["input_ids"], example_inputs["attention_mask"])
    with torch.no_grad():
        want = module({"input_ids": inputs[0], "attention_mask": inputs[1]})["hidden"]
        got = traced(*inputs)[0]
    if not torch.equal(got, want):
        raise ValueError(f"recycle.export: {type(module._base).__name__} cut at layer {module.k} "
                         "for export differs from the prefix's own forward (by up to "
                         f"{(got - want).abs().max().item():.3g}); it cannot be exported yet")
    config = getattr(module._base, "config", None)
    longest = getattr(config, "max_position_embeddings", None)
    return traced, inputs, longest if isinstance(longest, int) and longest >= 2 else None


def weights_digest(module):
    """The XXH3-128 hex of module's parameters and buffers (state_dict order), as recycle.build
    fingerprints a prefix and recycle.export records it."""
    state = module.state_dict()
    names = list(state.keys())
    return _native.tensors_fingerprint(names, [state[n] for n in names])


def export(module, example_inputs, path, dynamic_batch=True, dynamic_length=False, cache=None):
    """Writes `module` (in eval mode, on its device) to `path` as an AOTInductor package and
    returns the path. example_inputs: a tensor or a tuple of tensors (a batch the module takes;
    its batch size does not matter with dynamic_batch). dynamic_batch: any batch size at run time
    (the tools need it). dynamic_length: the second dimension of every input of two or more
    dimensions varies too (text prefixes).

    recycle.hf.split's prefix is exported from a tokenizer's output (example_inputs: the dict)
    as a package that takes input_ids and attention_mask ([B, L] each, L from 2 to the model's
    max_position_embeddings with dynamic_length) and returns the hidden states and the mask; its
    metadata says "recycle.input": "tokens", and recycle-build runs it on npy token ids
    (docs/pytorch2.md). It is checked to equal the prefix's forward on the example batch.

    cache: the cache directory a head was trained from (its identity goes into the package for
    recycle-predict --head). The training mode of the module and of each submodule is restored
    afterwards. Raises RuntimeError under a torch without AOTInductor packages."""
    compile_and_package = getattr(getattr(torch, "_inductor", None), "aoti_compile_and_package",
                                  None)
    if compile_and_package is None or not hasattr(torch, "export"):
        raise RuntimeError(f"recycle.export needs torch >= 2.6 (AOTInductor packages); this is "
                           f"torch {torch.__version__}: script the model instead "
                           "(torchscript:FILE, docs/torchscript.md)")
    if not isinstance(module, torch.nn.Module):
        raise ValueError("recycle.export takes an nn.Module")
    path = os.fspath(path)
    if not path.endswith(".pt2"):
        raise ValueError(f"{path}: an AOTInductor package's name ends in .pt2")
    metadata = {"recycle.weights": weights_digest(module)}
    if cache is not None:
        metadata["recycle.head"] = _native.head_identity_of_cache(os.fspath(cache))
    modes = [(m, m.training) for m in module.modules()]  # each as it was, children included
    module.eval()
    try:
        text = _text_prefix(module, example_inputs)
        longest = None
        if text is not None:  # the tools give it token ids and their mask (npy:DIR)
            module, inputs, longest = text
            metadata["recycle.input"] = "tokens"
        else:
            inputs = _as_tuple(example_inputs)
        with torch.no_grad():
            program = torch.export.export(
                module, inputs,
                dynamic_shapes=_dynamic_shapes(inputs, dynamic_batch, dynamic_length, longest))
        # Written beside, then renamed over path: a reader sees the old package or the new one.
        partial = f"{path[:-4]}.partial-{os.getpid()}.pt2"
        try:
            compile_and_package(program, package_path=partial,
                                inductor_configs={"aot_inductor.metadata": metadata})
            os.replace(partial, path)
        finally:
            if os.path.exists(partial):
                os.remove(partial)
        return path
    finally:
        for m, training in modes:
            m.training = training
