"""The report of a factworld learning run (:mod:`factrl.recipes.factworld`): accuracy per
stage with 95 % Wilson intervals, exact McNemar tests paired by claim against the
warm-up, and the reward curves; for a staged agent (ProFact) also the question METEOR
per stage with a paired sign-flip test by claim against the warm-up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["write_report"]


def _correct_by_id(d: Path, rar: bool = False) -> dict[str, float]:
    """Per claim 1.0 when the verdict's label is right (Binary RAR: when the response has
    no contradicted sentence, the exact verifier's reward)."""
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    if rar:
        return {t.claim_id: float(t.reward.components.get("no_contradiction", 0.0))
                for t in read_trajectories(d / TRAJ_FILE)}
    return {t.claim_id: float(t.verdict.label == t.claim.label) for t in read_trajectories(d / TRAJ_FILE)}


def _component_by_id(d: Path, key: str) -> dict[str, float]:
    """Binary RAR: one reward component per prompt (e.g. ``supported_sentences``)."""
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    return {t.claim_id: float(t.reward.components.get(key, 0.0)) for t in read_trajectories(d / TRAJ_FILE)}


def _informative_by_id(d: Path) -> dict[str, float]:
    """Binary RAR: per prompt 1.0 when the response states at least one fact the world
    supports (the guard against a reward won by saying nothing)."""
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    return {t.claim_id: float(t.reward.components.get("supported_sentences", 0.0) >= 1)
            for t in read_trajectories(d / TRAJ_FILE)}


def _meteor_by_id(d: Path) -> dict[str, float]:
    """Per-claim question METEOR of an evaluation (ProFact's AVeriTeC scores; {} when none)."""
    from factrl.metrics.averitec_submission import PER_CLAIM_FILE

    path = d / PER_CLAIM_FILE
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {str(row["claim_id"]): float(row["q_only"]) for row in rows}


def write_report(r: Any, recipe: dict[str, Any], out: Path, stages: dict[str, Path]) -> dict[str, Any]:
    """``report.md`` and ``results.json`` of a recipe run ``r`` (settings ``recipe``) from
    the evaluations on disk of ``stages``; a stage not evaluated (yet) is left out."""
    from factrl.metrics.significance import mcnemar_exact, paired_by_id, wilson_interval
    from factrl.train.callbacks import plot_curves

    from factrl.train.config import load_run_config

    rar = load_run_config(r.preset, dict(r.grpo_overrides)).env.name == "rar"  # Binary RAR: prompts, not claims
    rows = []
    base = _correct_by_id(out / "eval" / "warmup", rar)
    base_informative = _informative_by_id(out / "eval" / "warmup") if rar else {}
    base_meteor = _meteor_by_id(out / "eval" / "warmup")
    for name in stages:
        d = out / "eval" / name.replace("@", "-").replace("%", "pct")
        if not (d / "metrics.json").is_file():  # not evaluated (yet): another process may be on it
            continue
        got = _correct_by_id(d, rar)
        n, k = len(got), int(sum(got.values()))
        lo, hi = wilson_interval(k, n)
        row = {"stage": name, "n": n, "accuracy": k / n if n else None, "ci95": [lo, hi]}
        metrics = json.loads((d / "metrics.json").read_text())
        row["format_ok"] = metrics.get("format_ok_rate", metrics.get("format_ok"))
        if name != "warmup":
            common = sorted(set(got) & set(base))
            b = sum(1 for i in common if got[i] and not base[i])  # fixed
            c = sum(1 for i in common if base[i] and not got[i])  # broken
            row.update({"fixed_vs_warmup": b, "broken_vs_warmup": c, "mcnemar_p": mcnemar_exact(b, c)})
        if rar:  # accuracy is the no-contradiction rate; informative the share stating a supported fact
            row["contradiction_rate"] = 1 - row["accuracy"] if n else None
            info = _informative_by_id(d)
            row["informative"] = sum(info.values()) / len(info) if info else None
            # how much a response says: a reward won by saying less shows here
            for key in ("supported_sentences", "contradicted_sentences"):
                per = _component_by_id(d, key)
                row[key] = sum(per.values()) / len(per) if per else None
                if name != "warmup" and per:
                    test = paired_by_id(per, _component_by_id(out / "eval" / "warmup", key))
                    row[f"{key}_diff"], row[f"{key}_p"] = test["mean_diff"], test["p"]
            if name != "warmup":
                common = sorted(set(info) & set(base_informative))
                b = sum(1 for i in common if info[i] and not base_informative[i])
                c = sum(1 for i in common if base_informative[i] and not info[i])
                row.update({"informative_fixed": b, "informative_broken": c, "informative_p": mcnemar_exact(b, c)})
        meteor = _meteor_by_id(d)
        if meteor:
            row["question_meteor"] = sum(meteor.values()) / len(meteor)
            if name != "warmup" and base_meteor:
                test = paired_by_id(meteor, base_meteor)
                row.update({"meteor_diff_vs_warmup": test["mean_diff"], "meteor_p": test["p"]})
        rows.append(row)
    curves = {}
    for control in ("none", *r.controls):
        run = out / f"grpo-{control}"
        if (run / "metrics.jsonl").is_file():
            png = plot_curves(run / "metrics.jsonl", run / "curves.png")
            curves[control] = str(png) if png else None
    result = {"recipe": recipe, "stages": rows, "curves": curves}
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# factworld learning: {r.preset}", "",
             f"Held-out world seed {r.heldout_seed} ({rows[0]['n'] if rows else 0} {'prompts' if rar else 'claims'}); "
             f"training world seed {r.train_seed}; teacher noise {r.teacher_noise}; "
             f"{f'sampled at temperature {r.eval_temperature} (seed {r.eval_seed})' if r.eval_temperature else 'greedy'}.", ""]
    if rar:
        lines += _rar_table(rows)
    else:
        lines += ["| stage | accuracy | 95% CI | format ok | fixed / broken vs warm-up | McNemar p |", "|---|---|---|---|---|---|"]
    for row in [] if rar else rows:
        acc = "-" if row["accuracy"] is None else f"{row['accuracy']:.3f}"
        fmt = "-" if row.get("format_ok") is None else f"{row['format_ok']:.3f}"
        fb = f"{row['fixed_vs_warmup']} / {row['broken_vs_warmup']}" if "mcnemar_p" in row else ""
        p = f"{row['mcnemar_p']:.2g}" if "mcnemar_p" in row else ""
        lines.append(f"| {row['stage']} | {acc} | {row['ci95'][0]:.3f}–{row['ci95'][1]:.3f} | {fmt} | {fb} | {p} |")
    staged = [row for row in rows if "question_meteor" in row]
    if staged:
        lines += ["", "| stage | question METEOR | difference vs warm-up | paired sign-flip p |", "|---|---|---|---|"]
        for row in staged:
            diff = f"{row['meteor_diff_vs_warmup']:+.4f}" if "meteor_p" in row else ""
            p = f"{row['meteor_p']:.2g}" if "meteor_p" in row else ""
            lines.append(f"| {row['stage']} | {row['question_meteor']:.4f} | {diff} | {p} |")
    lines += ["", *(f"Curves ({c}): {p}" for c, p in curves.items() if p)]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return result


def _rar_table(rows: list[dict[str, Any]]) -> list[str]:
    """Binary RAR's rows: contradiction rate (lower is better; McNemar on the prompts that
    lost or gained a contradiction) and the share of informative responses."""
    lines = ["| stage | contradiction rate | 95% CI | informative | contradictions removed / added vs warm-up | "
             "McNemar p | informative gained / lost, p | supported / contradicted sentences per response "
             "(paired sign-flip p) |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if row["accuracy"] is None:
            continue
        lo, hi = row["ci95"]
        fb = f"{row['fixed_vs_warmup']} / {row['broken_vs_warmup']}" if "mcnemar_p" in row else ""
        p = f"{row['mcnemar_p']:.2g}" if "mcnemar_p" in row else ""
        info = "-" if row.get("informative") is None else f"{row['informative']:.3f}"
        ip = (f"{row['informative_fixed']} / {row['informative_broken']}, {row['informative_p']:.2g}"
              if "informative_p" in row else "")
        said = " / ".join(
            "-" if row.get(k) is None else f"{row[k]:.2f}" + (f" ({row[k + '_p']:.2g})" if k + "_p" in row else "")
            for k in ("supported_sentences", "contradicted_sentences"))
        lines.append(f"| {row['stage']} | {row['contradiction_rate']:.3f} | {1 - hi:.3f}–{1 - lo:.3f} | {info} | "
                     f"{fb} | {p} | {ip} | {said} |")
    return lines
