"""Broken-trainer controls: deliberate faults a learning benchmark must catch.

A trainer that "learns" can be a trainer that only drifts. These settings break GRPO in
the ways agent-RL users report most, so a benchmark can check that each one does *not*
improve on its warm-up while the real trainer does. They are for tests and benchmarks
only (``grpo.control``), never for training a model you mean to use.

- ``flip_advantage``: every optimised reward is negated before TRL normalises it within
  its group, so every advantage has its sign flipped (group mean-centring and scaling are
  odd in the reward): the policy is pushed away from what earned reward.
- ``invert_mask``: the loss mask is inverted — the tokens the environment inserted
  (retrieved observations) are trained and the model's own tokens are masked out.
- ``shuffle_rewards``: rewards are permuted at random within each group (seeded), so the
  advantages no longer belong to the rollouts that earned them.

The rollout's true rewards stay in the logged component columns and in
``reward_unaltered``, so the curves show what the policy really earned.

An inverted mask trains nothing of the model's own only where the observations do not
repeat it: an environment that quotes the model's earlier tokens back (ProFact's
verification record lists the questions the model asked) hands the inverted mask a copy
of them to train. :func:`echoed_tokens` measures how much of what it trains is such a
copy.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["CONTROLS", "UNALTERED", "apply_control", "check_control", "echo_flags", "echoed_tokens"]

CONTROLS = ("none", "flip_advantage", "invert_mask", "shuffle_rewards", "invert_mask_no_echo")
INVERTED = ("invert_mask", "invert_mask_no_echo")  # the controls that need which tokens were inserted
UNALTERED = "reward_unaltered"


def check_control(name: str) -> str:
    if name not in CONTROLS:
        raise ValueError(f"grpo.control must be one of {', '.join(CONTROLS)}, got {name!r}")
    return name


def apply_control(out: dict[str, Any], prompts: list[str], control: str, *, total: str, seed: int) -> dict[str, Any]:
    """Apply ``control`` to TRL's rollout dict ``out`` in place (and return it).
    ``prompts[i]`` names row ``i``'s group (TRL repeats a prompt once per rollout)."""
    check_control(control)
    if control == "none":
        return out
    out[UNALTERED] = list(out[total])
    if control == "flip_advantage":
        out[total] = [-float(r) for r in out[total]]
    elif control == "shuffle_rewards":
        rng = random.Random(seed)
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(prompts):
            groups.setdefault(p, []).append(i)
        rewards = list(out[total])
        for rows in groups.values():
            perm = rows[:]
            rng.shuffle(perm)
            for dst, src in zip(rows, perm):
                out[total][dst] = rewards[src]
    elif control in INVERTED:
        masks = []
        for prompt, ids, mask, inserted in zip(out["prompt_ids"], out["completion_ids"], out["env_mask"],
                                               out["_inserted"]):
            # model tokens (1) -> 0; environment tokens (0) -> 1; a closing EOS the
            # bridge appended (neither sampled nor observed) stays 0
            inverted = [0 if m else (1 if ins else 0) for m, ins in zip(mask, inserted)]
            if control == "invert_mask_no_echo":
                echo = _row_echo(prompt, ids, inserted)
                inverted = [0 if e else m for m, e in zip(inverted, echo)]
            masks.append(inverted)
        out["env_mask"] = masks
    return out


def _row_echo(prompt: Sequence[int], ids: Sequence[int], inserted: Sequence[int], n: int = 8) -> list[bool]:
    """Per completion token of one training row: an inserted token inside a run that echoes
    the model's own earlier tokens (:func:`echo_flags`; the tokens not inserted are the model's)."""
    parts: list[tuple[list[int], str]] = [(list(prompt), "prompt")]
    for tok, ins in zip(ids, inserted):
        kind = "env" if ins else "model"
        if parts[-1][1] != kind:
            parts.append(([], kind))
        parts[-1][0].append(tok)
    flags = echo_flags(parts, n)
    return [f for part in flags[1:] for f in part]


def echo_flags(parts: Sequence[tuple[Sequence[int], str]], n: int = 8) -> list[list[bool]]:
    """Per part of one episode's token stream (``(token_ids, kind)``, ``kind`` one of
    ``prompt``, ``model``, ``env``, in order), per token: whether it is an observation
    token inside a run of ``n`` or more tokens that the model itself wrote earlier in the
    stream and that neither the prompt nor an earlier observation held. A quote the model
    copied from what it was shown is not its own; an observation that repeats what it
    wrote of its own is an echo, which an inverted loss mask trains."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    shown: set[tuple[int, ...]] = set()
    own: set[tuple[int, ...]] = set()
    flags = []
    for ids, kind in parts:
        if kind not in ("prompt", "model", "env"):
            raise ValueError(f"a stream part's kind is prompt, model or env, got {kind!r}")
        ids = list(ids)
        grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
        covered = [False] * len(ids)
        if kind == "model":
            own.update(g for g in grams if g not in shown)
        else:
            if kind == "env":
                for i, g in enumerate(grams):
                    if g in own:
                        covered[i:i + n] = [True] * n
            shown.update(grams)
        flags.append(covered)
    return flags


def echoed_tokens(streams: Iterable[Sequence[tuple[Sequence[int], str]]], n: int = 8) -> tuple[int, int]:
    """(echoed observation tokens (:func:`echo_flags`), all observation tokens) over
    ``streams``, each an episode's token stream as ``(token_ids, kind)`` parts in order."""
    echoed = total = 0
    for parts in streams:
        for (ids, kind), covered in zip(parts, echo_flags(parts, n)):
            if kind == "env":
                total += len(covered)
                echoed += sum(covered)
    return echoed, total
