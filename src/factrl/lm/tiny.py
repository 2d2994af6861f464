"""A tiny randomly initialised model with SmolLM2's real tokenizer, for fast tests and dry runs.

It has SmolLM2's architecture (Llama, tied embeddings, grouped-query attention) and
vocabulary but a few small layers, so it runs the whole pipeline (generation, scoring,
GRPO steps) in seconds. Its text is gibberish; it only makes token bookkeeping checkable.
"""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["build_tiny_model"]


def build_tiny_model(
    out_dir: str | Path, *, layers: int = 2, hidden: int = 64, heads: int = 4, seed: int = 0
) -> Path:
    """Write a random SmolLM2-shaped model (and SmolLM2's tokenizer) to ``out_dir``; return it.

    ``load_lm(str(out_dir))`` loads the result. ``hidden`` must be divisible by ``heads``;
    key/value heads are half the query heads when ``heads`` is even (grouped-query
    attention, as in SmolLM2), else equal. The tokenizer comes from the cached embedded
    model, which is converted from its GGUF file first if needed.
    """
    if layers < 1 or hidden < 1 or heads < 1:
        raise ValueError(f"layers, hidden and heads must be >= 1, got {layers}, {hidden}, {heads}")
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from factrl.lm.embedded import ensure_embedded_model, fix_tokenizer

    source = ensure_embedded_model()
    config = AutoConfig.from_pretrained(str(source))
    config.num_hidden_layers = layers
    config.hidden_size = hidden
    config.num_attention_heads = heads
    config.num_key_value_heads = heads // 2 if heads % 2 == 0 else heads
    config.head_dim = hidden // heads
    config.intermediate_size = math.ceil(hidden * 8 / 3 / 8) * 8  # SmolLM2's ~8/3 ratio, multiple of 8
    config._name_or_path = f"factrl-tiny-smollm2-l{layers}-h{hidden}"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tokenizer = fix_tokenizer(AutoTokenizer.from_pretrained(str(source)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
