"""Choosing the next token from logits: the one rule both decoding paths use.

Greedy (temperature 0) takes the argmax and records logprobs at temperature 1; sampling
draws by inverse CDF over ``softmax(logits / temperature)`` (optionally top-p filtered)
with one uniform per row, given by the caller (:mod:`factrl.lm.engine.rng`). The
recorded logprob is the unfiltered ``log_softmax(logits / temperature)`` of the chosen
token — what a GRPO trainer recomputes. Only tensor ops with static shapes: the engine
runs it inside a captured CUDA graph.
"""

from __future__ import annotations

import torch

__all__ = ["choose_tokens", "top_p_filter"]


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    sorted_p, index = probs.sort(dim=-1, descending=True)
    drop = sorted_p.cumsum(dim=-1) - sorted_p > top_p  # keeps at least the most likely token
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter(-1, index, sorted_p)


def choose_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, u: torch.Tensor | None,
    choose: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token per row and its logprob. ``u``: float64 uniforms per row (unused when greedy);
    ``choose``: a copy of ``logits`` with banned tokens at -inf to choose from (a
    repetition guard) — logprobs stay those of ``logits``."""
    choose = logits if choose is None else choose
    if temperature == 0:
        logp = torch.log_softmax(logits, dim=-1)
        tok = choose.argmax(dim=-1)
    else:
        assert u is not None
        logp = torch.log_softmax(logits / temperature, dim=-1)
        probs = logp.exp() if choose is logits else torch.softmax(choose / temperature, dim=-1)
        if top_p < 1:
            probs = top_p_filter(probs, top_p)
        cdf = probs.double().cumsum(dim=-1)
        tok = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1])[:, None], right=True).squeeze(-1)
        # Rounding can land past the last token with non-zero probability; pull it back.
        last = probs.shape[-1] - 1 - (probs.flip(-1) > 0).int().argmax(dim=-1)
        tok = torch.minimum(tok, last)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)
