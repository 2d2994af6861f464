"""A rule-based Veri-R1 teacher that is wrong on purpose, for warm-ups that leave RL
something to learn.

It acts as :class:`~factrl.teachers.TemplateTeacher` (search the claim, cite the gold
sentences it was shown, a templated judgement), except that for a seeded share ``noise``
of the claims its verdict is a label drawn uniformly from the three — reasoning and
cited evidence made consistent with that label. A student imitating it learns the
protocol and a judgement that is right only part of the time.

``confusion`` adds systematic errors, the kind a real weak teacher makes: ``{"REFUTE":
("SUPPORT", 0.6)}`` answers SUPPORT on a seeded 60 % of the REFUTE claims (an agreeable
teacher). Uniform noise leaves the most frequent answer right, so a student's greedy
verdict can still be right; a confusion above one half teaches a wrong greedy verdict
that only a training signal from the gold label can undo.

``errors`` says where a wrong verdict goes wrong. ``"consistent"`` (the default): the
reasoning agrees with the wrong label (``Same, so the claim is supported`` over two
different values), so the student also learns a wrong reading. ``"verdict"``: the
reasoning reads the evidence right and only the conclusion is wrong (``The claim says
1117. [[x]] says 1106. Different, so the claim is supported.``) — a teacher whose answers
do not follow from its own reasoning. Its student learns the reading cleanly and a
verdict the reward can correct.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from factrl.labels import Label, UnknownLabelError, normalise_label
from factrl.teachers import TemplateTeacher
from factrl.types import Claim

__all__ = ["ERRORS", "NoisyTeacher", "noisy_label", "parse_confusion", "seeded_share"]

ERRORS = ("consistent", "verdict")

_LABELS = (Label.SUPPORT, Label.REFUTE, Label.NEI)


def _unit(seed: int, key: str) -> float:
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


def seeded_share(claims: Sequence[Claim], share: float, seed: int, what: str) -> set[str]:
    """The ids of a seeded ``share`` of ``claims`` drawn for the error ``what`` (each
    claim drawn on its own, so a claim's draw does not depend on the others)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"{what} share must be in [0, 1], got {share}")
    return {c.id for c in claims if _unit(seed, f"{what}:{c.id}") < share}


Confusion = dict[Label, tuple[Label, float]]


def parse_confusion(spec: dict[str, Any] | str | None) -> Confusion:
    """``{"REFUTE": ["SUPPORT", 0.6]}`` or ``"REFUTE->SUPPORT:0.6,NEI->REFUTE:0.2"`` ->
    ``{Label.REFUTE: (Label.SUPPORT, 0.6), ...}``; labels in any spelling
    :func:`~factrl.labels.normalise_label` reads, rates in [0, 1]."""
    if not spec:
        return {}
    items: list[tuple[str, str, float]] = []
    if isinstance(spec, str):
        for part in filter(None, (p.strip() for p in spec.split(","))):
            try:
                pair, rate = part.rsplit(":", 1)
                gold, said = pair.split("->")
                items.append((gold, said, float(rate)))
            except ValueError:
                raise ValueError(f"confusion entry {part!r} is not GOLD->SAID:RATE") from None
    else:
        for gold, val in spec.items():
            said, rate = val
            items.append((gold, said, float(rate)))
    out: Confusion = {}
    for gold, said, rate in items:
        try:
            g, t = normalise_label(gold.strip()), normalise_label(said.strip())
        except UnknownLabelError as exc:
            raise ValueError(f"confusion {gold!r} -> {said!r}: {exc}") from None
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"confusion rate must be in [0, 1], got {rate} for {gold} -> {said}")
        out[g] = (t, rate)
    return out


def noisy_label(claim: Claim, noise: float, seed: int, confusion: Confusion | None = None) -> Label | None:
    """The label the teacher gives ``claim``: the gold one, or — for a seeded share
    ``noise`` of claims — one drawn uniformly from the three (possibly the gold one); a
    ``confusion`` entry for the gold label first answers its wrong label on a seeded share."""
    if claim.label is None:
        return None
    wrong = (confusion or {}).get(claim.label)
    if wrong is not None and _unit(seed, f"confuse:{claim.id}") < wrong[1]:
        return wrong[0]
    if _unit(seed, f"noise:{claim.id}") >= noise:
        return claim.label
    return _LABELS[min(2, int(_unit(seed, f"label:{claim.id}") * 3))]


class NoisyTeacher(TemplateTeacher):
    """``NoisyTeacher(claims, noise=0.5, seed=0, confusion=None, errors="consistent")``;
    ``noise=0`` without a confusion is the template teacher."""

    name = "noisy-teacher"

    def __init__(self, claims: Sequence[Claim], *, noise: float, seed: int = 0,
                 confusion: dict[str, Any] | str | None = None, errors: str = "consistent", **kw: Any) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        if errors not in ERRORS:
            raise ValueError(f"errors must be one of {', '.join(ERRORS)}, got {errors!r}")
        self.errors = errors
        conf = parse_confusion(confusion)
        noisy = [c.model_copy(update={"label": noisy_label(c, noise, seed, conf)}) for c in claims]
        reads = {c.id: c.label for c in claims} if errors == "verdict" else None
        super().__init__(noisy, read_labels=reads, **kw)
        self.noise = noise
        self.seed = seed
        self.confusion = conf
