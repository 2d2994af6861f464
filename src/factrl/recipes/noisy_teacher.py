"""A rule-based Veri-R1 teacher that is wrong on purpose, for warm-ups that leave RL
something to learn.

It acts as :class:`~factrl.train.teacher.TemplateTeacher` (search the claim, cite the gold
sentences it was shown, a templated judgement), except that for a seeded share ``noise``
of the claims its verdict is a label drawn uniformly from the three — reasoning and
cited evidence made consistent with that label. A student imitating it learns the
protocol and a judgement that is right only part of the time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from factrl.labels import Label
from factrl.train.teacher import TemplateTeacher
from factrl.types import Claim

__all__ = ["NoisyTeacher", "noisy_label"]

_LABELS = (Label.SUPPORT, Label.REFUTE, Label.NEI)


def _unit(seed: int, key: str) -> float:
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


def noisy_label(claim: Claim, noise: float, seed: int) -> Label | None:
    """The label the teacher gives ``claim``: the gold one, or — for a seeded share
    ``noise`` of claims — one drawn uniformly from the three (possibly the gold one)."""
    if claim.label is None or _unit(seed, f"noise:{claim.id}") >= noise:
        return claim.label
    return _LABELS[min(2, int(_unit(seed, f"label:{claim.id}") * 3))]


class NoisyTeacher(TemplateTeacher):
    """``NoisyTeacher(claims, noise=0.5, seed=0)``; ``noise=0`` is the template teacher."""

    name = "noisy-teacher"

    def __init__(self, claims: Sequence[Claim], *, noise: float, seed: int = 0, **kw: Any) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        noisy = [c.model_copy(update={"label": noisy_label(c, noise, seed)}) for c in claims]
        super().__init__(noisy, **kw)
        self.noise = noise
        self.seed = seed
