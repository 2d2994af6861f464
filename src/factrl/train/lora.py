"""One LoRA configuration for every trainer (SFT, weighted SFT, GRPO).

``layers`` limits the adapters to the top ``layers`` transformer blocks: backpropagation
then stops below them, so a step costs a forward pass plus a backward pass through those
blocks only — about 1.7x faster with the top 10 of SmolLM2-135M's 30 blocks on the CPU
(``docs/benchmarks.md``). ``None`` adapts every block (the papers' setting).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["lora_config", "top_layers"]


def top_layers(model_path: str, layers: int | None) -> list[int] | None:
    """The indices of the top ``layers`` blocks of the model at ``model_path`` (``None``:
    every block). A count that is not positive is refused; one above the model's depth
    means every block."""
    if layers is None:
        return None
    if int(layers) < 1:
        raise ValueError(f"lora_layers must be a positive number of top blocks (or unset for all), got {layers}")
    from transformers import AutoConfig

    depth = int(AutoConfig.from_pretrained(model_path).num_hidden_layers)
    return list(range(max(0, depth - int(layers)), depth))


def lora_config(model_path: str, *, r: int, alpha: int, targets: Sequence[str], dropout: float = 0.0,
                layers: int | None = None) -> Any:
    """A causal-LM ``peft.LoraConfig`` on ``targets``, in the top ``layers`` blocks."""
    from peft import LoraConfig

    kw: dict[str, Any] = {}
    chosen = top_layers(model_path, layers)
    if chosen is not None:
        kw = {"layers_to_transform": chosen, "layers_pattern": "layers"}
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(targets),
                      task_type="CAUSAL_LM", **kw)
