"""Frozen linear weights cast once, not at every decode step, under CPU autocast.

A trainer's rollouts generate with its float32 model under bf16 autocast
(:mod:`factrl.train.rollout_adapter`). Autocast casts each linear layer's weight to bf16
at every call and keeps the cast only for weights that require gradients, so with LoRA
every frozen weight of the model is cast again at every decode step: a pass over all of
its float32 weights for a step whose own arithmetic, at a few rows, is small. On the CPU
that cast was most of a rollout's decode step (docs/benchmarks.md, "Float32 attention").

:func:`cast_frozen_weights` gives each frozen float32 ``nn.Linear`` weight, for the length
of a block, the bf16 (or fp16) tensor autocast would have made, so autocast casts only the
activations and every product is the one it computed before, bit for bit. The casts live
in a ``store`` the caller owns: :meth:`factrl.lm.hf.HFLM.reuse_turns` keeps one for its
block (a rollout batch: no weight changes inside it), so the weights are cast once a batch;
without one they are cast once a generate call. A weight whose version counter moved is
cast again. Weights that train (LoRA's) are left to autocast. An output layer tied to the
input embedding gets the cast as its own weight for the block (the embedding lookup is not
autocast's and keeps the float32 table).
Outside CPU autocast it does nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["cast_frozen_weights"]

Casts = dict[int, tuple[torch.Tensor, int, torch.Tensor]]  # id(weight) -> (weight, its version, the cast)


@contextmanager
def cast_frozen_weights(model: torch.nn.Module, device: torch.device, store: Casts | None = None,
                        dtype: torch.dtype | None = None) -> Iterator[int]:
    """Within this block, ``model``'s frozen float32 linear weights hold their autocast
    dtype's values (see the module's docstring), taken from ``store`` or cast into it;
    yields how many were swapped. Enter it outside ``torch.inference_mode`` (a kept cast
    is used again later). ``dtype`` names the autocast dtype for a block entered outside
    autocast whose model calls all run under it (a trainer's step, its backward
    included: :class:`factrl.train.callbacks.FrozenWeightCasts`)."""
    if device.type != "cpu" or (dtype is None and not torch.is_autocast_enabled("cpu")):
        yield 0
        return
    dtype = dtype or torch.get_autocast_dtype("cpu")
    if dtype not in (torch.bfloat16, torch.float16):
        yield 0
        return
    store = {} if store is None else store
    shared = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters(recurse=False)}
    swapped: list[tuple[torch.Tensor, torch.Tensor]] = []  # weight, its float32 data
    tied: list[tuple[torch.nn.Module, torch.nn.Parameter]] = []  # output layer, the embedding's weight
    try:
        with torch.no_grad():
            for module in model.modules():
                if not isinstance(module, torch.nn.Linear):
                    continue
                w = module.weight
                if w.requires_grad or w.dtype != torch.float32:
                    continue
                held = store.get(id(w))
                if held is None or held[0] is not w or held[1] != w._version or held[2].dtype != dtype:
                    held = (w, w._version, w.detach().to(dtype))
                    store[id(w)] = held
                if id(w) in shared:  # the lookup needs the float32 table: the layer gets its own
                    tied.append((module, w))
                    module._parameters["weight"] = torch.nn.Parameter(held[2], requires_grad=False)
                else:
                    swapped.append((w, w.data))
                    w.data = held[2]
        yield len(swapped) + len(tied)
    finally:
        for w, data in swapped:
            w.data = data
        for module, w in tied:
            module._parameters["weight"] = w
