"""How sure the warm-up was of the answers each later stage changed.

A trainer that only drifts (a control whose advantages have zero expectation, e.g.
rewards shuffled within the group) flips the warm-up's least confident answers first.
When the warm-up's errors are its low-margin answers — an SFT warm-up taught by a
teacher that slips 70 % of the time learns the slip as a 0.7 probability, and greedy
decoding turns it into every answer — "fixes more than it breaks" is a weak test
against drift. This module measures it from the evaluations' greedy trajectories, for
agents whose final turn concludes in words (``... Same, so the claim is refuted.``, ``...
so there is not enough information``: the compare teachers' format, HARIS's always):
per claim, the probability the model gave its own conclusion — the product of the
recorded token probabilities from ``so`` to the end of the conclusion's word — and, per
later stage, that probability under the warm-up over the claims it fixed, those still
wrong and those it broke; and, within each kind of wrong answer (the same reading and
conclusion, so only the margin differs), a rank-sum test of whether the claims it fixed
were the warm-up's less sure ones.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Conclusion", "conclusions", "load_decoder", "margins", "margin_lines", "reading"]

_CONCLUSION = re.compile(r"\bso (?:the claim is|there is) ((?:not )?\w+)")
_NOT_FOUND = re.compile(r"No sentence gives it|No answer gives it|did not find the answer|found nothing that supports")


def reading(text: str) -> str:
    """What a final answer's reasoning read: ``Same`` / ``Different`` (the claimed value
    beside the found one), ``not found``, or ``other`` (no comparison written)."""
    if "Different," in text:
        return "Different"
    if "Same," in text:
        return "Same"
    return "not found" if _NOT_FOUND.search(text) else "other"


@dataclass(frozen=True)
class Conclusion:
    """One claim's final turn: its reading, its conclusion's word (None when it wrote
    none) and the probability the model gave that conclusion (None without one, or
    without recorded log-probabilities)."""

    reading: str
    word: str | None
    p: float | None


def load_decoder(model_dir: Path) -> Callable[[int], str] | None:
    """Token id -> its text, from ``model_dir/tokenizer.json`` (None when there is none)."""
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    return lambda i: tok.decode([i], skip_special_tokens=False)


def conclusions(path: Path, decode: Callable[[int], str]) -> dict[str, Conclusion]:
    """Per claim of one evaluation's ``trajectories.jsonl``: its :class:`Conclusion`."""
    from factrl.runs.trajectories import read_trajectories

    out: dict[str, Conclusion] = {}
    for t in read_trajectories(path):
        model = [x for x in t.turns if x.source == "model"]
        final = model[-1] if model else None
        if final is None:
            out[t.claim_id] = Conclusion("other", None, None)
            continue
        word = p = None
        if final.logprobs and len(final.logprobs) == len(final.token_ids):
            starts, text = [], ""
            for i in final.token_ids:
                starts.append(len(text))
                text += decode(i)
            m = _CONCLUSION.search(text)
            if m:
                first = max(k for k, s in enumerate(starts) if s <= m.start())
                last = max(k for k, s in enumerate(starts) if s < m.end())
                word, p = m.group(1), math.exp(sum(final.logprobs[first:last + 1]))
        out[t.claim_id] = Conclusion(reading(final.text), word, p)
    return out


def _summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    q1 = statistics.quantiles(values, n=4, method="inclusive")[0] if len(values) > 1 else values[0]
    return {"n": len(values), "median": statistics.median(values), "q1": q1, "min": min(values), "max": max(values)}


def margins(warm: dict[str, Conclusion], correct: dict[str, dict[str, bool]]) -> dict[str, Any] | None:
    """The warm-up's probability of its conclusion per (reading, conclusion, right) cell,
    and for each other stage of ``correct`` (stage -> claim id -> right; ``warmup`` among
    them) over the claims it fixed, left wrong and broke. None when the warm-up wrote no
    worded conclusion with log-probabilities."""
    base = correct.get("warmup")
    if base is None or not any(c.p is not None for c in warm.values()):
        return None
    cells: dict[str, list[float]] = {}
    for cid, c in warm.items():
        if c.p is not None and cid in base:
            cells.setdefault(f"{c.reading} -> {c.word} ({'right' if base[cid] else 'wrong'})", []).append(c.p)
    stages = {}
    for name, got in correct.items():
        if name == "warmup":
            continue
        common = [i for i in base if i in got]
        groups = {"fixed": [i for i in common if not base[i] and got[i]],
                  "still_wrong": [i for i in common if not base[i] and not got[i]],
                  "broken": [i for i in common if base[i] and not got[i]]}
        stages[name] = {k: {**_summary([warm[i].p for i in ids if i in warm and warm[i].p is not None]),
                            "claims": len(ids)} for k, ids in groups.items()}
        stages[name]["fixes_lower"] = _fixes_lower(warm, groups["fixed"], groups["still_wrong"])
    return {"warmup": {k: _summary(v) for k, v in sorted(cells.items())}, "stages": stages}


def _cell(c: Conclusion) -> str:
    return f"{c.reading} -> {c.word}"


def _fixes_lower(warm: dict[str, Conclusion], fixed: list[str], left: list[str]) -> dict[str, dict[str, Any]]:
    """Per warm-up cell of wrong answers (reading -> conclusion) holding both claims a stage
    fixed and claims it left wrong: one-sided rank-sum p that the fixed ones were the
    warm-up's less sure (:func:`factrl.metrics.significance.rank_sum_lower`). Within one
    cell the answers are the same and only their margin differs, so a small p says the
    stage flipped that error's least sure instances — what drift does, and what a trainer
    part of the way does too; one that learned the right answer fixes them whatever their
    margin by the run's end. ``p_holm``: ``p``
    adjusted over the stage's cells (Holm), which the report's note reads."""
    from factrl.metrics.significance import holm_adjust, rank_sum_lower

    by_cell: dict[str, tuple[list[float], list[float]]] = {}
    for ids, side in ((fixed, 0), (left, 1)):
        for i in ids:
            c = warm.get(i)
            if c is not None and c.p is not None:
                by_cell.setdefault(_cell(c), ([], []))[side].append(c.p)
    tests = {cell: {"fixed": len(f), "left": len(w), "p": rank_sum_lower(f, w)}
             for cell, (f, w) in sorted(by_cell.items()) if f and w}
    # a stage is tested in every cell that holds both: its flag must hold for them together
    for t, adjusted in zip(tests.values(), holm_adjust([t["p"] for t in tests.values()])):
        t["p_holm"] = adjusted
    return tests


def _fmt(s: dict[str, Any]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f}), {s['n']}" if s.get("n") else "–"


def _holm(t: dict[str, Any], cells: int) -> str:
    return f"{t.get('p_holm', t['p']):.2g} adjusted over the stage's {cells} cells"


def margin_lines(m: dict[str, Any] | None) -> list[str]:
    """The report's section: the warm-up's probability of its conclusion, per cell and
    over what each stage changed, and a note per stage and cell of wrong answers whose
    fixes sit lower than the errors it left there (rank-sum p < 0.05, Holm-adjusted over
    the stage's cells; results written before the adjustment are read by their p)."""
    if not m:
        return []
    lines = ["", "How sure the warm-up was of its conclusions (the probability it gave its own "
             "`so the claim is ...`, median (range), claims): a trainer that only drifts flips the "
             "least sure first.", "", "| warm-up: reading -> conclusion | probability |", "|---|---|"]
    lines += [f"| {k} | {_fmt(s)} |" for k, s in m["warmup"].items()]
    lines += ["", "| stage | the warm-up's probability on the claims it fixed | on those still wrong | "
              "on those it broke |", "|---|---|---|---|"]
    notes = []
    for name, g in m["stages"].items():
        lines.append(f"| {name} | {_fmt(g['fixed'])} | {_fmt(g['still_wrong'])} | {_fmt(g['broken'])} |")
        cells = g.get("fixes_lower", {})
        notes += [f"- {name}: of the warm-up's `{cell}` errors, the {t['fixed']} fixed sat lower in its "
                  f"probability than the {t['left']} left (one-sided rank-sum p = {t['p']:.2g}"
                  + (f", {_holm(t, len(cells))}" if len(cells) > 1 else "") + "): it flipped that "
                  "error's least sure answers first, as drift does and as a trainer part of the way does too; "
                  "at a run's end, against its controls paired by claim, the two part."
                  for cell, t in cells.items() if t.get("p_holm", t["p"]) < 0.05]
    return lines + ([""] + notes if notes else [])
