"""One place that maps every dataset's label spelling onto factrl's labels."""

from __future__ import annotations

import re
from enum import Enum

__all__ = ["GRADE_ALIASES", "GRADE_LABELS", "Grade", "Label", "LABEL_ALIASES", "UnknownLabelError", "normalise_grade", "normalise_label"]


class Label(str, Enum):
    SUPPORT = "SUPPORT"
    REFUTE = "REFUTE"
    NEI = "NOT ENOUGH INFO"
    CONFLICTING = "CONFLICTING"

    def __str__(self) -> str:  # print the canonical spelling the prompts use
        return self.value


class UnknownLabelError(ValueError):
    """Raised for a label spelling no dataset uses."""


# Keys are upper-cased with runs of spaces, '_' and '-' collapsed to one space.
LABEL_ALIASES: dict[str, Label] = {
    # support
    "SUPPORT": Label.SUPPORT,
    "SUPPORTS": Label.SUPPORT,
    "SUPPORTED": Label.SUPPORT,
    "S": Label.SUPPORT,
    # refute (SciFact CONTRADICT, HoVer NOT_SUPPORTED, HARIS unsupported, AVeriTeC Refuted)
    "REFUTE": Label.REFUTE,
    "REFUTES": Label.REFUTE,
    "REFUTED": Label.REFUTE,
    "CONTRADICT": Label.REFUTE,
    "CONTRADICTS": Label.REFUTE,
    "CONTRADICTED": Label.REFUTE,
    "NOT SUPPORTED": Label.REFUTE,
    "UNSUPPORTED": Label.REFUTE,
    "R": Label.REFUTE,
    # not enough info
    "NOT ENOUGH INFO": Label.NEI,
    "NOT ENOUGH INFORMATION": Label.NEI,
    "NOT ENOUGH EVIDENCE": Label.NEI,
    "NOTENOUGHINFO": Label.NEI,
    "NEI": Label.NEI,
    "N": Label.NEI,
    # conflicting (AVeriTeC; Climate-FEVER's DISPUTED claims have evidence both ways)
    "CONFLICTING": Label.CONFLICTING,
    "CONFLICTING EVIDENCE": Label.CONFLICTING,
    "CONFLICTING EVIDENCE/CHERRYPICKING": Label.CONFLICTING,
    "CHERRYPICKING": Label.CONFLICTING,
    "DISPUTED": Label.CONFLICTING,
}

_SEP = re.compile(r"[\s_\-]+")


def _key(raw: str) -> str:
    key = _SEP.sub(" ", raw.strip().upper()).strip()
    return re.sub(r"\s*/\s*", "/", key)


def normalise_label(raw: str | Label) -> Label:
    """Map any known spelling (``"SUPPORTS"``, ``"not_enough_info"``, ``"Refuted"``,
    ``"CONTRADICT"``, ...) to a :class:`Label`; unknown spellings raise
    :class:`UnknownLabelError` naming the value and the accepted spellings."""
    if isinstance(raw, Label):
        return raw
    if not isinstance(raw, str):
        raise UnknownLabelError(f"label must be a string, got {type(raw).__name__}: {raw!r}")
    key = _key(raw)
    label = LABEL_ALIASES.get(key)
    if label is None:
        known = ", ".join(sorted(LABEL_ALIASES))
        raise UnknownLabelError(f"unknown label {raw!r}; known spellings: {known}")
    return label


class Grade(str, Enum):
    """A graded truth rating of news fact-checks: PolitiFact's six grades (LIAR, LIAR-RAW)
    of which Snopes-based RAWFC uses three (true / half / false)."""

    TRUE = "true"
    MOSTLY_TRUE = "mostly-true"
    HALF_TRUE = "half-true"
    BARELY_TRUE = "barely-true"
    FALSE = "false"
    PANTS_FIRE = "pants-fire"

    def __str__(self) -> str:
        return self.value


# Keys as for LABEL_ALIASES (upper case, separators collapsed to one space).
GRADE_ALIASES: dict[str, Grade] = {
    "TRUE": Grade.TRUE,
    "MOSTLY TRUE": Grade.MOSTLY_TRUE,
    "HALF TRUE": Grade.HALF_TRUE,
    "HALF": Grade.HALF_TRUE,  # RAWFC
    "BARELY TRUE": Grade.BARELY_TRUE,
    "FALSE": Grade.FALSE,
    "PANTS FIRE": Grade.PANTS_FIRE,
    "PANTS ON FIRE": Grade.PANTS_FIRE,
}

# The grade → label mapping factrl uses for graded news datasets: a half-true claim is
# partly right and partly wrong, which is AVeriTeC's "conflicting evidence/cherrypicking".
GRADE_LABELS: dict[Grade, Label] = {
    Grade.TRUE: Label.SUPPORT,
    Grade.MOSTLY_TRUE: Label.SUPPORT,
    Grade.HALF_TRUE: Label.CONFLICTING,
    Grade.BARELY_TRUE: Label.REFUTE,
    Grade.FALSE: Label.REFUTE,
    Grade.PANTS_FIRE: Label.REFUTE,
}


def normalise_grade(raw: str | Grade) -> Grade:
    """Map a truth-rating spelling (``"half-true"``, ``"half"``, ``"pants-fire"``,
    ``"Mostly True"``, ...) to a :class:`Grade`; unknown spellings raise
    :class:`UnknownLabelError`."""
    if isinstance(raw, Grade):
        return raw
    if not isinstance(raw, str):
        raise UnknownLabelError(f"grade must be a string, got {type(raw).__name__}: {raw!r}")
    grade = GRADE_ALIASES.get(_key(raw))
    if grade is None:
        raise UnknownLabelError(f"unknown grade {raw!r}; known spellings: {', '.join(sorted(GRADE_ALIASES))}")
    return grade
