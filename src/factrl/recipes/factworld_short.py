"""Binary RAR's answer accuracy on a generated world: the held-out world's short-form
questions (:mod:`factrl.datasets.factworld.short_questions`), asked of every evaluated
stage with the entity's document as notes and the paper's abstention instruction
(001, §4.1), and scored by string match against the world's answers.

Per stage: on the answerable questions, right / wrong / abstained and the accuracy (with
a Wilson interval and an exact McNemar test paired by question against the warm-up);
on the unanswerable ones, how often the model abstained (the notes do not hold the
answer, so any answer is a guess); and the paper's short-form hallucination rate, the
share of all questions answered wrongly (an answered unanswerable question counts as
wrong). A lower contradiction rate bought by answering fewer questions right shows here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.types import Claim

__all__ = ["MIXED_DIR", "short_claims", "short_dir", "short_rows", "short_table", "write_mixed_prompts"]

MIXED_DIR = "rar_mix"  # a world's long-form prompts and answerable short questions, alternating


def write_mixed_prompts(world: Path) -> Path:
    """``world/rar_mix/<split>.jsonl``: per split the world's long-form prompts and its
    answerable short-form questions (the same entities), alternating, in file order — the
    prompt set Binary RAR's recipe trains on with ``train_short`` (the paper trains on
    natural prompts of every kind, not one). Rewritten from the world's own files, so the
    same world gives the same bytes."""
    import json

    out = world / MIXED_DIR
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        long = (world / "rar" / f"{split}.jsonl").read_text().splitlines()
        short = [line for line in (world / "rar_short" / f"{split}.jsonl").read_text().splitlines()
                 if line.strip() and json.loads(line).get("answerable")]
        rows = [row for pair in zip(long, short) for row in pair]
        rows += long[len(short):] + short[len(long):]
        (out / f"{split}.jsonl").write_text("".join(f"{row}\n" for row in rows if row.strip()))
    return out


def short_dir(r: Any, out: Path, name: str) -> Path:
    """Where the stage ``name``'s answers to the short questions are written (per question
    count, so another ``short_questions`` on a resumed run is evaluated afresh)."""
    return out / "eval" / f"short-{r.short_questions}" / name.replace("@", "-").replace("%", "pct")


def short_claims(world: Path, n: int) -> list[Claim]:
    """``n`` answerable and ``n`` unanswerable questions of the world in ``world`` (as many
    as it has), alternating, in file order (train, dev, test)."""
    from factrl.datasets import load_dataset

    where = world / "rar_short"
    if not where.is_dir():
        raise FileNotFoundError(f"{where} is missing: the world was generated before short-form questions existed; "
                                "generate it again (same seed, same files plus rar_short/)")
    rows = [c for split in ("train", "dev", "test") for c in load_dataset("rar_prompts", where, split).claims]
    yes = [c for c in rows if c.meta.get("answerable")][:n]
    no = [c for c in rows if not c.meta.get("answerable")][:n]
    out = [c for pair in zip(yes, no) for c in pair]
    longer = yes if len(yes) > len(no) else no
    return out + longer[min(len(yes), len(no)):]


def _outcomes(d: Path) -> dict[str, tuple[bool, bool, bool]]:
    """Per question: (answerable, right, abstained)."""
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    return {t.claim_id: (bool(t.claim.meta.get("answerable")), bool(t.meta.get("correct")),
                         bool(t.meta.get("abstained"))) for t in read_trajectories(d / TRAJ_FILE)}


def _paired(now: dict[str, bool], base: dict[str, bool]) -> dict[str, Any]:
    from factrl.metrics.significance import mcnemar_by_id

    b, c, p = mcnemar_by_id(now, base)
    return {"gained": b, "lost": c, "p": p}


def short_rows(r: Any, out: Path, stages: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per stage evaluated on the short questions (none when the run asks none)."""
    from factrl.metrics.significance import wilson_interval

    if getattr(r, "short_questions", 0) <= 0:
        return []
    base = _outcomes(short_dir(r, out, "warmup"))
    rows = []
    for name in stages:
        d = short_dir(r, out, name)
        if not (d / "metrics.json").is_file():
            continue
        got = _outcomes(d)
        ans = {i: v for i, v in got.items() if v[0]}
        una = {i: v for i, v in got.items() if not v[0]}
        right = sum(v[1] for v in ans.values())
        abstained = sum(v[2] for v in ans.values())
        wrong = len(ans) - right - abstained
        guessed = sum(not v[2] for v in una.values())
        attempted = len(ans) - abstained
        row: dict[str, Any] = {
            "stage": name, "answerable": len(ans), "right": right, "wrong": wrong, "abstained": abstained,
            "accuracy": right / len(ans) if ans else None, "ci95": list(wilson_interval(right, len(ans))),
            "accuracy_attempted": right / attempted if attempted else None,
            "unanswerable": len(una), "unanswerable_abstained": len(una) - guessed,
            "hallucination_rate": (wrong + guessed) / len(got) if got else None}
        if name != "warmup" and base:
            row["right_vs_warmup"] = _paired({i: v[1] for i, v in ans.items()},
                                             {i: v[1] for i, v in base.items() if v[0]})
            row["abstained_unanswerable_vs_warmup"] = _paired({i: v[2] for i, v in una.items()},
                                                              {i: v[2] for i, v in base.items() if not v[0]})
        rows.append(row)
    return rows


def short_table(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as report.md lines."""
    if not rows:
        return []
    lines = ["", "Short-form questions of the held-out world (notes shown, abstention allowed; string match):", "",
             "| stage | answerable: right / wrong / abstained | accuracy | 95% CI | accuracy when answering | "
             "right gained / lost vs warm-up, p | unanswerable: abstained | abstained gained / lost, p | "
             "hallucination rate |", "|---|---|---|---|---|---|---|---|---|"]

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    def vs(t: dict[str, Any] | None) -> str:
        return "" if t is None else f"{t['gained']} / {t['lost']}, {t['p']:.2g}"

    for row in rows:
        lo, hi = row["ci95"]
        lines.append(f"| {row['stage']} | {row['right']} / {row['wrong']} / {row['abstained']} of {row['answerable']} | "
                     f"{fmt(row['accuracy'])} | {lo:.3f}–{hi:.3f} | {fmt(row['accuracy_attempted'])} | "
                     f"{vs(row.get('right_vs_warmup'))} | {row['unanswerable_abstained']} of {row['unanswerable']} | "
                     f"{vs(row.get('abstained_unanswerable_vs_warmup'))} | {fmt(row['hallucination_rate'])} |")
    return lines
