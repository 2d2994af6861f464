"""Reading and verdict, separately, for every evaluated stage of a factworld recipe run
whose teacher reasons by comparison (``--recipe teacher_reasoning=compare``; HARIS's
teacher always does): what the final answer's reasoning read (``Same``, ``Different``,
nothing found) and which label it then gave.

A label accuracy mixes two skills: reading the evidence and concluding from the reading.
A warm-up taught by a teacher wrong only at the conclusion (``--recipe
teacher_errors=verdict``) reads right and concludes wrong; this table shows which of the
two GRPO (or a control) changed — the verdict given a reading, the reading, or only the
label prior.

    PYTHONPATH=src .venv/bin/python benchmarks/factworld_reading.py RUN_DIR [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from factrl.labels import Label, UnknownLabelError, normalise_label
from factrl.recipes.factworld_margins import reading
from factrl.runs.trajectories import read_trajectories

READINGS = ("Same", "Different", "not found", "other")
# the reading each gold label calls for (HARIS reads NOT ENOUGH INFO as Refute: a missed hop)
RIGHT = {Label.SUPPORT: "Same", Label.REFUTE: "Different", Label.NEI: "not found"}
FOLLOWS = {"Same": Label.SUPPORT, "Different": Label.REFUTE, "not found": Label.NEI}


def _label(value: object) -> Label | None:
    try:
        return normalise_label(str(value)) if value not in (None, "") else None
    except UnknownLabelError:
        return None


def stage_table(path: Path) -> dict:
    """Counts of (gold, reading, verdict) for one evaluation's trajectories, and the
    shares that separate the skills."""
    cells: Counter = Counter()
    for t in read_trajectories(path):
        final = t.turns[-1].text if t.turns else ""
        gold = t.claim.label
        said = _label(t.verdict.label) if t.verdict is not None else None
        cells[(gold.value if gold else "-", reading(final), said.value if said else "unread")] += 1
    n = sum(cells.values())
    read_right = sum(k for (g, r, _), k in cells.items() if g in {lab.value for lab in RIGHT}
                     and RIGHT[Label(g)] == r)
    out = {"n": n, "reading_right": read_right,
           "cells": [{"gold": g, "reading": r, "verdict": v, "count": k} for (g, r, v), k in sorted(cells.items())]}
    for r in ("Same", "Different", "not found"):
        given = [(v, k) for (_, rr, v), k in cells.items() if rr == r]
        total = sum(k for _, k in given)
        verdicts: Counter = Counter()
        for v, k in given:
            verdicts[v] += k
        out[f"after_{r.replace(' ', '_')}"] = {"n": total, "verdicts": dict(verdicts),
                                              "follows": verdicts[FOLLOWS[r].value]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a `factrl train factworld` run directory")
    ap.add_argument("--json", type=Path, default=None, help="also write the tables here")
    a = ap.parse_args()
    stages = {d.name: stage_table(d / "trajectories.jsonl")
              for d in sorted((a.run / "eval").iterdir()) if (d / "trajectories.jsonl").is_file()}
    if not stages:
        raise SystemExit(f"no evaluated stage under {a.run / 'eval'}")
    print("| stage | claims | reading right | after Same: SUPPORT of | after Different: REFUTE of "
          "| after nothing found: NOT ENOUGH INFO of |")
    print("|---|---:|---:|---|---|---|")
    for name, s in stages.items():
        cols = [f"{s[k]['follows']} / {s[k]['n']}" for k in ("after_Same", "after_Different", "after_not_found")]
        print(f"| {name} | {s['n']} | {s['reading_right']} | " + " | ".join(cols) + " |")
    if a.json:
        a.json.write_text(json.dumps(stages, indent=1))


if __name__ == "__main__":
    main()
