"""Evidence-labelled (claim, evidence) pairs for the verifier, and their splits.

A :class:`Pair` is one claim (or response sentence) with one evidence text and a label
among :data:`VERIFIER_LABELS` (SUPPORT / REFUTE / NOT ENOUGH INFO). Each source
(:mod:`factrl.verifier.sources`) turns a dataset's gold evidence into pairs and adds
retrieved hard negatives for NOT ENOUGH INFO.

Splits are by *group*, never by pair: claims that share a cited document or an evidence
page (SciFact's negated variants of one citation, FEVEROUS claims about one page) land in
the same split (:func:`connected_groups`), and a group's split is a seeded hash of its
key (:func:`split_of`), so adding a source or a claim never moves another group. The
``held_out`` split is never read by training or calibration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from factrl.labels import Label
from factrl.registry import Registry

__all__ = [
    "LABEL_INDEX",
    "PAIR_SOURCES",
    "SPLITS",
    "VERIFIER_LABELS",
    "Pair",
    "PairSource",
    "SplitFractions",
    "build_pairs",
    "connected_groups",
    "label_counts",
    "split_of",
]

# The classifier's outputs, in this order.
VERIFIER_LABELS: tuple[Label, ...] = (Label.SUPPORT, Label.REFUTE, Label.NEI)
LABEL_INDEX: dict[Label, int] = {label: i for i, label in enumerate(VERIFIER_LABELS)}
SPLITS = ("train", "validation", "held_out")


@dataclass(frozen=True)
class Pair:
    """One (claim, evidence) pair. ``kind`` says how the evidence was chosen: ``gold``
    (the dataset's evidence for this label), ``gold_sentence`` (one sentence of a
    multi-sentence gold rationale), ``annotated`` (a sentence labelled against the claim,
    Climate-FEVER), ``hard_negative`` (retrieved text that is not the claim's evidence:
    NOT ENOUGH INFO), ``cited`` (a sentence of a document an NEI claim cites) or
    ``negated`` (a supported claim negated by rule against its gold rationale: REFUTE)
    ``retrieved`` (an on-topic sentence of an abstract the claim does not cite: NOT
    ENOUGH INFO) or ``nli`` (an SNLI hypothesis against its premise)."""

    source: str
    claim_id: str
    claim: str
    evidence: str
    label: Label
    kind: str
    group: str
    split: str = "train"

    @property
    def target(self) -> int:
        return LABEL_INDEX[self.label]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["label"] = self.label.value
        return d


@dataclass(frozen=True)
class SplitFractions:
    """Shares of groups held out (never trained on) and kept for validation
    (calibration, early stopping, thresholds); the rest trains."""

    held_out: float = 0.2
    validation: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if not (0.0 <= self.held_out < 1.0 and 0.0 <= self.validation < 1.0 and self.held_out + self.validation < 1.0):
            raise ValueError(f"need 0 <= held_out, validation and held_out + validation < 1, got {self}")


def split_of(source: str, group: str, fractions: SplitFractions) -> str:
    """The split of ``group``: a uniform draw from SHA-256 of (seed, source, group)."""
    digest = hashlib.sha256(f"{fractions.seed}\x00{source}\x00{group}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < fractions.held_out:
        return "held_out"
    if u < fractions.held_out + fractions.validation:
        return "validation"
    return "train"


def connected_groups(keys: Sequence[Sequence[str]]) -> list[str]:
    """One group name per item: items sharing any key are in one group (union-find);
    the group's name is its smallest key. An item with no keys is a group of its own
    (named by its position)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for ks in keys:
        ks = [str(k) for k in ks]
        for k in ks[1:]:
            a, b = find(ks[0]), find(k)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return [find(str(ks[0])) if ks else f"#item{i}" for i, ks in enumerate(keys)]


@runtime_checkable
class PairSource(Protocol):
    """Builds the pairs of one dataset from the data folder (``../shared/data`` layout);
    ``path`` names the file or folder it reads under that folder."""

    name: str
    path: str  # under the data folder (an absolute path: a file elsewhere, e.g. a cache)

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]: ...


PAIR_SOURCES: Registry[PairSource] = Registry("verifier pair source")
for _name in ("scifact", "scifact_retrieved", "scifact_titled", "scifact_retrieved_titled", "climate_fever",
              "feverous_s", "averitec", "veri_r1_offline"):
    PAIR_SOURCES.register_lazy(_name, "factrl.verifier.sources")
PAIR_SOURCES.register_lazy("scifact_negated", "factrl.verifier.negation")
PAIR_SOURCES.register_lazy("snli", "factrl.verifier.snli")


def build_pairs(data_dir: Path | str, sources: Iterable[str], fractions: SplitFractions,
                *, on_missing: str = "raise", log: Callable[[str], None] | None = None) -> list[Pair]:
    """Every pair of ``sources`` under ``data_dir``, each with its split. A source whose
    file is missing raises (``on_missing="skip"``: skipped and logged)."""
    data_dir = Path(data_dir)
    out: list[Pair] = []
    for name in sources:
        source = PAIR_SOURCES.get(name)
        if not (data_dir / source.path).exists():
            msg = f"verifier data: source {name!r} needs {data_dir / source.path}, which does not exist"
            if getattr(source, "hint", ""):
                msg += f" ({source.hint})"
            if on_missing == "skip":
                if log:
                    log(msg + "; skipped")
                continue
            raise FileNotFoundError(msg)
        got = source.pairs(data_dir, fractions)
        if log:
            log(f"verifier data: {name}: {len(got)} pairs " + ", ".join(
                f"{s} {sum(p.split == s for p in got)}" for s in SPLITS))
        out.extend(got)
    return out


def label_counts(pairs: Iterable[Pair]) -> dict[str, int]:
    counts = {label.value: 0 for label in VERIFIER_LABELS}
    for p in pairs:
        counts[p.label.value] += 1
    return counts
