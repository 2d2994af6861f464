"""One place that maps every dataset's label spelling onto factrl's labels."""

from __future__ import annotations

import re
from enum import Enum

__all__ = ["Label", "UnknownLabelError", "normalise_label", "LABEL_ALIASES"]


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
