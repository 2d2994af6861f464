"""Reuse the frozen lower blocks' output across SFT epochs.

With LoRA in the top blocks only (``lora_layers``), the blocks below them and the
embeddings do not change during training, so an example's hidden state at the first
trained block is the same in every epoch. :class:`FrozenPrefixCache` keeps it from the
example's first pass and, in later epochs, runs only the trained blocks on it: in the
slow learning test's warm-up (two epochs, the top 10 of SmolLM2's 30 blocks trained) the
second epoch's forward then skips two thirds of the model.

Rows are independent of their batch: with right padding and causal attention, a token's
hidden state depends only on the tokens before it, so a row's cached states are those a
full forward of any batch would compute (up to the float rounding of other batch
shapes). Only the Llama layout is supported (its decoder applies nothing to
``inputs_embeds`` and gives every block the same mask); any other model, a trainable
parameter below the top blocks, or a single epoch leaves the cache off. The cache holds
float32 states up to a memory budget; rows past it run the full model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

__all__ = ["FrozenPrefixCache", "frozen_blocks", "only_blocks"]

SUPPORTED = ("llama",)


def frozen_blocks(causal_lm: Any) -> int:
    """How many of the bottom decoder blocks of ``causal_lm`` (with the embeddings) hold
    no trainable parameter; 0 when the embeddings train or the layout is not Llama's."""
    backbone = getattr(causal_lm, "model", None)
    layers = getattr(backbone, "layers", None)
    if getattr(getattr(causal_lm, "config", None), "model_type", None) not in SUPPORTED or layers is None:
        return 0
    if any(p.requires_grad for p in backbone.embed_tokens.parameters()):
        return 0
    for i, block in enumerate(layers):
        if any(p.requires_grad for p in block.parameters()):
            return i
    return 0  # nothing trains in the blocks: not a setting this cache is for


@contextmanager
def only_blocks(backbone: Any, start: int = 0, stop: int | None = None) -> Iterator[None]:
    """Within this block ``backbone`` (a Llama decoder stack) runs its decoder blocks
    ``start:stop`` alone: from hidden states at block ``start`` (``inputs_embeds``) or up
    to block ``stop``. Each block keeps its own layer index, so it reads and writes its own
    layer of a KV cache."""
    full = backbone.layers
    backbone.layers = torch.nn.ModuleList(list(full)[start:stop])
    try:
        yield
    finally:
        backbone.layers = full


class FrozenPrefixCache:
    """Per-example hidden states at the input of the first trained block."""

    def __init__(self, causal_lm: Any, *, budget_bytes: int) -> None:
        self.lm = causal_lm
        self.k = frozen_blocks(causal_lm)
        self.budget = int(budget_bytes)
        self.states: dict[int, torch.Tensor] = {}
        self.used = 0
        self.hits = 0

    @property
    def enabled(self) -> bool:
        return self.k > 0 and self.budget > 0

    def covers(self, rows: Sequence[int]) -> bool:
        return self.enabled and all(r in self.states for r in rows)

    @contextmanager
    def capture(self, rows: Sequence[int], lengths: Sequence[int]) -> Iterator[None]:
        """Record each row's states at the first trained block during the full forward
        run inside this block (rows already held or past the budget are skipped)."""
        if not self.enabled or self.covers(rows):
            yield
            return

        def hook(_module: Any, args: tuple, kwargs: dict) -> None:
            h = args[0] if args else kwargs["hidden_states"]
            for b, (row, n) in enumerate(zip(rows, lengths)):
                size = n * h.shape[-1] * 4
                if row not in self.states and self.used + size <= self.budget:
                    self.states[row] = h[b, :n].detach().float().clone()
                    self.used += size

        handle = self.lm.model.layers[self.k].register_forward_pre_hook(hook, with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()

    def forward(self, rows: Sequence[int], attention_mask: torch.Tensor,
                past_key_values: Any = None) -> torch.Tensor:
        """The backbone's last hidden state for ``rows`` (all held), from the trained
        blocks alone. With ``past_key_values`` (a shared prompt before every row,
        :mod:`factrl.train.shared_prompt`) the held states are those after the prompt and
        ``attention_mask`` covers the prompt too."""
        backbone = self.lm.model
        width = attention_mask.shape[1] - (past_key_values.get_seq_length() if past_key_values is not None else 0)
        first = self.states[rows[0]]
        hidden = first.new_zeros((len(rows), width, first.shape[-1]))
        for b, row in enumerate(rows):
            s = self.states[row]
            hidden[b, : s.shape[0]] = s
        hidden = hidden.to(attention_mask.device)
        with only_blocks(backbone, self.k):
            out = backbone(inputs_embeds=hidden, attention_mask=attention_mask, past_key_values=past_key_values,
                           use_cache=past_key_values is not None).last_hidden_state
        self.hits += len(rows)
        return out
