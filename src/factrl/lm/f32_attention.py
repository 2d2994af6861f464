"""Attention in float32 over a float32 KV cache when a CPU model computes in bf16.

On the CPU, torch's SDPA in bfloat16 is slow where the queries are few and the keys many:
a decode step of SmolLM2-135M over 12 rows of an 800-token cache took 0.54 s in bf16 and
0.21 s with attention alone in float32 over a float32 cache (docs/benchmarks.md, "CPU
training speed", "Tried and not kept"). Multi-turn agents decode over long contexts (a
HARIS reasoner's ~1,000 tokens), and since the turn cache (:mod:`factrl.lm.turn_cache`)
prefills only the new tokens, such steps are most of their time.

Asked for, the eager decode loop (:mod:`factrl.lm.hf_decode`) keeps its cache in float32
when the model computes in bf16 or fp16 on the CPU (:func:`store_dtype`); the keys and values are
rounded to the compute dtype by their projections, then widened, so only the attention's
own arithmetic changes, and it is the more exact one. :func:`install` wraps transformers'
``sdpa`` attention function: when the keys are float32 and the queries are not (only
such a cache makes that), the queries are widened, attention runs in float32 and its
output is rounded back; every other call goes to transformers' function unchanged, so
training and scoring forwards of the same model compute exactly what they did.

``$FACTRL_CPU_ATTENTION``: ``native`` (default: the compute dtype's SDPA) or ``float32``.
Opt-in, because where it was measured it did not pay: a HARIS evaluation of a bf16 model
(48 claims, the turn cache on) took 197.1 s with it against 180.8 s without, the prefills
of the turns' new tokens costing more in float32 than the decode steps saved
(docs/benchmarks.md, "Float32 attention"). The HARIS recipe run `runs/hs` was measured
with it on; ``float32`` reproduces that run's rounding.
"""

from __future__ import annotations

import os
from typing import Any

import torch

__all__ = ["cpu_attention", "install", "store_dtype"]

_MARK = "_factrl_f32_cache"
_CHOICES = ("float32", "native")


def cpu_attention() -> str:
    """``$FACTRL_CPU_ATTENTION`` (``native`` unless set)."""
    raw = os.environ.get("FACTRL_CPU_ATTENTION", "native").strip().lower()
    if raw not in _CHOICES:
        raise ValueError(f"FACTRL_CPU_ATTENTION must be one of {', '.join(_CHOICES)}, got {raw!r}")
    return raw


def store_dtype(device: torch.device, compute: torch.dtype) -> torch.dtype | None:
    """The dtype a decode cache should hold on ``device`` for a model computing in
    ``compute``: float32 on the CPU for bf16/fp16 (and the attention wrapper installed),
    else None (the keys' own dtype)."""
    if device.type != "cpu" or compute not in (torch.bfloat16, torch.float16) or cpu_attention() != "float32":
        return None
    return torch.float32 if install() else None


def install() -> bool:
    """Wrap transformers' ``sdpa`` attention function (idempotent); whether it is wrapped."""
    try:
        from transformers.modeling_utils import AttentionInterface
    except ImportError:  # pragma: no cover - transformers without the interface
        return False
    current = AttentionInterface._global_mapping.get("sdpa")
    if current is None:
        return False
    if getattr(current, _MARK, False):
        return True
    original = current

    def sdpa(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             attention_mask: torch.Tensor | None, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
        if key.dtype == torch.float32 and query.dtype != torch.float32 and query.device.type == "cpu":
            if attention_mask is not None and attention_mask.is_floating_point():
                attention_mask = attention_mask.float()
            out, weights = original(module, query.float(), key, value.float(), attention_mask, *args, **kwargs)
            return out.to(query.dtype), weights
        return original(module, query, key, value, attention_mask, *args, **kwargs)

    setattr(sdpa, _MARK, True)
    sdpa.__wrapped__ = original  # type: ignore[attr-defined]
    AttentionInterface.register("sdpa", sdpa)
    return True
