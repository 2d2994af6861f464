"""The losses the retriever is trained with: FFRR's REINFORCE (§5), its exact
expectation over the candidates, and REPLUG's KL.

Each takes log π_θ(d|q) over a candidate set as a tensor with gradient; each is a plain
function, so a hand-made case checks the direction of an update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["expected_reward_loss", "reinforce_loss", "replug_loss"]


def reinforce_loss(log_probs: Sequence[Any], rewards: Sequence[float], *, baseline: float = 0.0) -> Any:
    """−mean over sampled (q, d) of log π_θ(d|q)·(R(q, d) − baseline): minimising it
    follows the REINFORCE estimate of ∇E[R] (the paper's update has no baseline, 0)."""
    import torch

    if len(log_probs) != len(rewards):
        raise ValueError(f"{len(log_probs)} log-probabilities but {len(rewards)} rewards")
    if not log_probs:
        raise ValueError("no sampled (query, document) pairs to learn from")
    lp = torch.stack(list(log_probs))
    r = torch.tensor([float(x) - baseline for x in rewards], dtype=lp.dtype, device=lp.device)
    if not torch.isfinite(r).all():
        raise ValueError(f"rewards must be finite, got {list(rewards)}")
    return -(lp * r).mean()


def expected_reward_loss(log_probs: Any, rewards: Sequence[float]) -> Any:
    """−E_{d∼π_θ}[R(q, d)] = −Σ_d π_θ(d|q)·R(q, d) over the whole candidate set, for
    rewards known for every candidate (``ffrr.estimator = "exact"``). Its gradient is
    Σ_d π_θ(d)·(R(d) − E_π[R])·∇log π_θ(d): the REINFORCE gradient in expectation, with
    the policy's own mean as the baseline and no sampling noise."""
    import torch

    if log_probs.shape[0] != len(rewards):
        raise ValueError(f"{log_probs.shape[0]} documents but {len(rewards)} rewards")
    r = torch.tensor([float(x) for x in rewards], dtype=log_probs.dtype, device=log_probs.device)
    if not torch.isfinite(r).all():
        raise ValueError(f"rewards must be finite, got {list(rewards)}")
    return -(torch.log_softmax(log_probs, dim=-1).exp() * r).sum()


def replug_loss(log_probs: Any, lm_scores: Sequence[float], *, beta: float = 1.0) -> Any:
    """REPLUG's LM-supervised retrieval loss: KL(P_R ‖ Q_LM) over the top documents, with
    P_R = softmax(retrieval scores / τ) (``log_probs``, renormalised here over the given
    documents) and Q_LM = softmax(score_LM(gold | claim, d) / β) (Shi et al., 2023, §4)."""
    import torch

    if log_probs.shape[0] != len(lm_scores):
        raise ValueError(f"{log_probs.shape[0]} documents but {len(lm_scores)} LM scores")
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    p_log = torch.log_softmax(log_probs, dim=-1)
    q_log = torch.log_softmax(torch.tensor(list(lm_scores), dtype=p_log.dtype, device=p_log.device) / beta, dim=-1)
    return (p_log.exp() * (p_log - q_log)).sum()
