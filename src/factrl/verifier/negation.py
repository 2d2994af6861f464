"""Rule-negated SciFact claims: extra REFUTE pairs for training (``scifact_negated``).

SciFact's own REFUTE claims were written by negating supported claims (a reversed
direction, a dropped or added "not"), and they are the verifier's weakest class there.
This source turns each *training* SUPPORT pair of ``scifact`` (the claim with its gold
rationale) into a REFUTE pair by one rule, the first that applies:

1. a claim that says "not" loses it ("X does not cause Y" → "X does cause Y");
2. a direction word is swapped ("increases" → "decreases", "higher" → "lower", …);
3. "not" is put after the first "is / are / was / were / can / may / will".

Claims no rule changes give no pair. Only training-split pairs are made, so validation,
calibration and held-out figures stay on SciFact's own claims; the source is opt-in
(``--sources scifact,scifact_negated,…``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from factrl.labels import Label
from factrl.verifier.pairs import PAIR_SOURCES, Pair, SplitFractions

__all__ = ["SciFactNegatedPairs", "negate_claim"]

_SWAPS = {
    "increase": "decrease", "increases": "decreases", "increased": "decreased", "increasing": "decreasing",
    "higher": "lower", "more": "less", "greater": "smaller", "positive": "negative", "positively": "negatively",
    "upregulates": "downregulates", "upregulated": "downregulated", "upregulation": "downregulation",
    "activates": "inhibits", "activated": "inhibited", "promotes": "inhibits", "enhances": "reduces",
    "improves": "worsens", "improved": "worsened", "raises": "lowers", "elevated": "reduced",
    "reduces": "increases", "reduced": "increased", "lowers": "raises", "inhibits": "promotes",
    "inhibited": "promoted", "suppresses": "promotes", "worse": "better", "better": "worse",
}
_SWAPS.update({v: k for k, v in list(_SWAPS.items()) if v not in _SWAPS})
_NOT = re.compile(r"\b(not|no longer)\s+", re.IGNORECASE)
_AUX = re.compile(r"\b(is|are|was|were|can|may|will)\b(?!\s+not\b)", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z]+")


def _cased(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def negate_claim(text: str) -> str | None:
    """The claim negated by the first rule that applies (module docstring), or ``None``."""
    text = text.strip()
    if not text:
        return None
    if _NOT.search(text):
        return _NOT.sub("", text, count=1)
    for m in _WORD.finditer(text):
        swap = _SWAPS.get(m.group(0).lower())
        if swap:
            return text[:m.start()] + _cased(swap, m.group(0)) + text[m.end():]
    m = _AUX.search(text)
    if m:
        word = m.group(1)
        negated = "cannot" if word.lower() == "can" else f"{word} not"
        return text[:m.start()] + _cased(negated, word) + text[m.end():]
    return None


@dataclass(frozen=True)
class SciFactNegatedPairs:
    name: str = "scifact_negated"
    path: str = "scifact"

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]:
        base = PAIR_SOURCES.get("scifact").pairs(data_dir, fractions)
        out: list[Pair] = []
        for p in base:
            if p.split != "train" or p.label != Label.SUPPORT or p.kind not in ("gold", "gold_sentence"):
                continue
            negated = negate_claim(p.claim)
            if negated and negated != p.claim:
                out.append(Pair(self.name, f"{p.claim_id}:negated", negated, p.evidence, Label.REFUTE,
                                "negated", p.group, "train"))
        return out


PAIR_SOURCES.register("scifact_negated")(SciFactNegatedPairs())
