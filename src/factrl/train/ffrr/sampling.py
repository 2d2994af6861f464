"""FFRR's sampling rules (§4.1, §4.2): ε-greedy document and question choice, the
stopping rule. Pure Python over probabilities and scores, so every rule is testable alone.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["DocEpisode", "epsilon_greedy_pick", "pick_questions", "run_doc_episode", "stop_reached"]


def epsilon_greedy_pick(probs: Sequence[float], rng: random.Random, *, epsilon: float, top_k: int,
                        exclude: Sequence[int] = ()) -> tuple[int, bool]:
    """One document index from the candidates D′ (``probs`` = π_θ(d|q) over D′).

    With probability ``epsilon``: uniform over D′ (explore); otherwise from π_θ restricted
    to its ``top_k`` most probable candidates and renormalised (exploit). Already sampled
    indices (``exclude``) are never drawn again. Returns ``(index, explored)``.
    """
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    gone = set(exclude)
    left = [i for i in range(len(probs)) if i not in gone]
    if not left:
        raise ValueError("no candidate left to sample")
    if rng.random() < epsilon:
        return rng.choice(left), True
    top = sorted(left, key=lambda i: -probs[i])[:top_k]
    weights = [max(float(probs[i]), 0.0) for i in top]
    if not math.fsum(weights) > 0:
        return top[0], False
    return rng.choices(top, weights=weights, k=1)[0], False


def stop_reached(label_probs: Sequence[Sequence[float]], gold: int) -> bool:
    """FFRR's stopping rule: stop once argmax over labels of the summed scores of the
    documents sampled so far is the gold label (ties go to the first label)."""
    if not label_probs:
        return False
    sums = [math.fsum(row[j] for row in label_probs) for j in range(len(label_probs[0]))]
    return max(range(len(sums)), key=sums.__getitem__) == gold


@dataclass
class DocEpisode:
    """One document-level episode: the sampled candidate indices in order, each one's
    label distribution and reward (its gold-label probability), whether it was explored,
    the final prediction reward r_g over the first k = min(K, κ) documents and whether
    the stopping rule fired (else the sample budget ran out)."""

    picked: list[int] = field(default_factory=list)
    label_probs: list[list[float]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    explored: list[bool] = field(default_factory=list)
    final_reward: float = 0.0
    stopped: bool = False
    final_docs: list[int] = field(default_factory=list)


def run_doc_episode(probs: Sequence[float], gold: int, rng: random.Random,
                    score_one: Callable[[int], list[float]],
                    score_set: Callable[[list[int]], list[float]], *,
                    epsilon: float, top_k: int, max_samples: int, stop: bool = True,
                    final: bool = True) -> DocEpisode:
    """Sample documents ε-greedily until the stopping rule fires (or ``max_samples``);
    ``score_one(i)`` is the LM's label distribution given the claim and candidate ``i``,
    ``score_set(indices)`` given the claim and those candidates together. ``stop=False``
    skips the stopping rule; ``final=False`` skips r_g (``score_set`` is not called)."""
    if max_samples < 1:
        raise ValueError(f"max_samples must be >= 1, got {max_samples}")
    ep = DocEpisode()
    for _ in range(min(max_samples, len(probs))):
        i, explored = epsilon_greedy_pick(probs, rng, epsilon=epsilon, top_k=top_k, exclude=ep.picked)
        dist = score_one(i)
        ep.picked.append(i)
        ep.explored.append(explored)
        ep.label_probs.append(dist)
        ep.rewards.append(float(dist[gold]))
        if stop and stop_reached(ep.label_probs, gold):
            ep.stopped = True
            break
    ep.final_docs = ep.picked[: min(top_k, len(ep.picked))]
    ep.final_reward = float(score_set(ep.final_docs)[gold]) if final else 0.0
    return ep


def pick_questions(rewards: Sequence[float], k: int, rng: random.Random, *, epsilon: float) -> list[int]:
    """§4.2: questions sorted by their reward r_q, lowest first, and ``k`` of them picked
    ε-greedily: each pick is the lowest-reward question left (exploit) or, with
    probability ``epsilon``, a uniformly random one left (explore)."""
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
    order = sorted(range(len(rewards)), key=lambda i: rewards[i])
    chosen: list[int] = []
    while order and len(chosen) < k:
        j = rng.randrange(len(order)) if rng.random() < epsilon else 0
        chosen.append(order.pop(j))
    return chosen
