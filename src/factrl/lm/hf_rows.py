"""What the transformers backend's generation and scoring share: checked token-id rows,
left padding, decoding, and chunking (:class:`HFRows`, a base of :class:`~factrl.lm.hf.HFLM`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

__all__ = ["HFRows", "chunks"]


def chunks(items: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class HFRows:
    """Token-id rows for a transformers model: the attributes :class:`~factrl.lm.hf.HFLM`
    sets, and the checks and padding its generation and scoring run on them."""

    model: Any
    tokenizer: Any
    name: str
    max_batch_size: int
    pad_token_id: int
    eos_token_ids: frozenset[int]
    vocab_size: int

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens,
                                     clean_up_tokenization_spaces=False)

    def _left_pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, width - len(r):] = torch.tensor(r, dtype=torch.long)
            attn[b, width - len(r):] = 1
        return ids.to(self.device), attn.to(self.device)

    def _check_prompts(self, prompts: Sequence[Sequence[int]], what: str) -> list[list[int]]:
        if isinstance(prompts, (str, bytes)):
            raise TypeError(f"{what}s must be a list of token-id lists, got a string")
        rows = []
        for i, p in enumerate(prompts):
            if isinstance(p, str):
                raise TypeError(f"{what} {i} is a string; pass token ids (see chat_prompt_ids/encode)")
            row = [int(t) for t in p]
            if not row and what == "prompt":
                raise ValueError(f"{what} {i} is empty; a prompt needs at least one token")
            bad = [t for t in row if not 0 <= t < self.vocab_size]
            if bad:
                raise ValueError(f"{what} {i} has token id {bad[0]} outside the vocabulary (size {self.vocab_size})")
            rows.append(row)
        return rows
