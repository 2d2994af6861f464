"""The weights of a Llama-family decoder, read from a live transformers model.

The engine runs its own forward pass (:mod:`factrl.lm.engine.forward`) over these
tensors. A plain parameter of the right dtype is used as it is, so an optimizer's
in-place update is seen by the next generate call with no copy. A LoRA-wrapped layer
(PEFT) or a dtype change needs a buffer: :meth:`DecoderWeights.refresh` recomputes the
effective weight (base + the active adapters' deltas) into it before each call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["SUPPORTED", "unsupported_reason", "DecoderWeights", "LayerWeights"]

# model_type -> needs nothing beyond the Llama layout (Qwen2 adds q/k/v biases, read from the modules)
SUPPORTED = ("llama", "qwen2", "mistral")


def _base_model(model: Any) -> Any:
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) else model


def unsupported_reason(model: Any) -> str | None:
    """Why the engine cannot run ``model`` (None when it can)."""
    base = _base_model(model)
    cfg = getattr(base, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind not in SUPPORTED:
        return f"model type {kind!r} is not one of {', '.join(SUPPORTED)}"
    layer_types = getattr(cfg, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types):
        return "sliding-window attention layers"
    if kind == "mistral" and getattr(cfg, "sliding_window", None):
        return "sliding-window attention"
    inner = getattr(base, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(base, "lm_head"):
        return "not a *ForCausalLM with .model.layers and .lm_head"
    act = type(getattr(inner.layers[0].mlp, "act_fn", None)).__name__
    if act not in ("SiLU", "SiLUActivation"):
        return f"MLP activation {act}"
    return None


def _module(mod: Any) -> Any:
    """The module PEFT routes to: a ``modules_to_save`` copy when one is active."""
    saved = getattr(mod, "modules_to_save", None)
    if saved is not None:
        for name in getattr(mod, "active_adapters", []) or []:
            if name in saved:
                return saved[name]
        return getattr(mod, "original_module", mod)
    return mod


def _linear(mod: Any) -> tuple[torch.Tensor, torch.Tensor | None, bool]:
    """(effective weight, bias, computed) of a Linear or a PEFT LoRA layer around one."""
    mod = _module(mod)
    base = getattr(mod, "base_layer", None)
    if base is None:
        return mod.weight, getattr(mod, "bias", None), False
    weight = base.weight
    deltas = []
    if not getattr(mod, "merged", False) and not getattr(mod, "disable_adapters", False):
        for name in getattr(mod, "active_adapters", []) or []:
            if name in getattr(mod, "lora_A", {}):
                deltas.append(mod.get_delta_weight(name))
    if deltas:
        weight = weight + sum(d.to(weight.dtype) for d in deltas)
    return weight, getattr(base, "bias", None), True


class _Slot:
    """One weight the forward pass reads: the source tensor itself, or a buffer."""

    def __init__(self, read: Any, dtype: torch.dtype) -> None:
        self.read = read  # () -> (tensor, computed)
        src, computed = read()
        self.aliased = not computed and src.dtype == dtype
        self.dtype = dtype
        self.tensor = src if self.aliased else src.detach().to(dtype).clone()

    def refresh(self) -> None:
        if not self.aliased:
            src, _ = self.read()
            self.tensor.copy_(src.detach())


@dataclass
class LayerWeights:
    ln_in: torch.Tensor
    ln_post: torch.Tensor
    wq: torch.Tensor
    wk: torch.Tensor
    wv: torch.Tensor
    wo: torch.Tensor
    bq: torch.Tensor | None
    bk: torch.Tensor | None
    bv: torch.Tensor | None
    bo: torch.Tensor | None
    w_gate: torch.Tensor
    w_up: torch.Tensor
    w_down: torch.Tensor
    eps_in: float
    eps_post: float


@dataclass
class DecoderWeights:
    """Every tensor of the decoder in the engine's dtype, plus its shapes."""

    model: Any
    dtype: torch.dtype
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    hidden: int = 0
    vocab: int = 0
    layers: list[LayerWeights] = field(default_factory=list)
    _slots: list[_Slot] = field(default_factory=list)

    def __post_init__(self) -> None:
        reason = unsupported_reason(self.model)
        if reason:
            raise ValueError(f"the decode engine cannot run this model: {reason}")
        base = _base_model(self.model)
        cfg = base.config
        inner = base.model
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads)
        self.hidden = int(cfg.hidden_size)
        self.inner = inner
        self.embed = self._param(lambda: (_module(inner.embed_tokens).weight, False))
        self.norm = self._param(lambda: (inner.norm.weight, False))
        self.norm_eps = float(inner.norm.variance_epsilon)
        self.lm_head = self._param(lambda: _linear(base.lm_head)[::2])
        self.vocab = int(self.lm_head.shape[0])
        for layer in inner.layers:
            att, mlp = layer.self_attn, layer.mlp
            lw = {}
            for key, mod in (("q", att.q_proj), ("k", att.k_proj), ("v", att.v_proj), ("o", att.o_proj)):
                lw["w" + key] = self._param(lambda m=mod: _linear(m)[::2])
                has_bias = _linear(mod)[1] is not None
                lw["b" + key] = self._param(lambda m=mod: (_linear(m)[1], _linear(m)[2])) if has_bias else None
            self.layers.append(LayerWeights(
                ln_in=self._param(lambda l=layer: (l.input_layernorm.weight, False)),
                ln_post=self._param(lambda l=layer: (l.post_attention_layernorm.weight, False)),
                w_gate=self._param(lambda m=mlp: _linear(m.gate_proj)[::2]),
                w_up=self._param(lambda m=mlp: _linear(m.up_proj)[::2]),
                w_down=self._param(lambda m=mlp: _linear(m.down_proj)[::2]),
                eps_in=float(layer.input_layernorm.variance_epsilon),
                eps_post=float(layer.post_attention_layernorm.variance_epsilon),
                **lw,
            ))

    def _param(self, read: Any) -> torch.Tensor:
        slot = _Slot(read, self.dtype)
        self._slots.append(slot)
        return slot.tensor

    def refresh(self) -> None:
        """Recompute every buffered weight from the live model (LoRA deltas, casts)."""
        with torch.no_grad():
            for slot in self._slots:
                slot.refresh()

    def rotary(self, length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin tables ``[length, head_dim]`` from the model's own rotary module."""
        rot = self.inner.rotary_emb
        probe = torch.zeros(1, dtype=self.dtype, device=device)
        pos = torch.arange(length, device=device)[None]
        with torch.no_grad():
            cos, sin = rot(probe, pos)
        return cos[0].to(self.dtype).contiguous(), sin[0].to(self.dtype).contiguous()
