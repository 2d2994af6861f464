"""Markdown and one-line summaries of a metrics dict from
:func:`factrl.metrics.compute_metrics`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["metrics_markdown", "format_summary_line", "format_failure_lines"]

_REQUIRED = ("n", "label_acc", "verification_acc", "joint_acc", "evidence_score", "format_ok_rate")

# (key, row name) of the overall table, in display order; optional keys are skipped when
# absent so reports of older runs still render.
_OVERALL = (
    ("n", "items"),
    ("label_acc", "label accuracy"),
    ("verification_acc", "verification accuracy"),
    ("joint_acc", "joint accuracy"),
    ("evidence_score", "evidence score (mean IoU)"),
    ("evidence_score_authors", "evidence score, authors' convention (IoU 0 when gold is empty)"),
    ("evidence_score_with_gold", "evidence score, items with gold evidence"),
    ("evidence_cover", "evidence cover (every gold id cited)"),
    ("format_ok_rate", "format ok"),
    ("macro_f1", "macro-F1"),
    ("mean_reward", "mean reward"),
    ("errors", "episodes ended in error (counted wrong)"),
    ("episodes_with_format_failures", "episodes with format failures"),
    ("skipped_rows", "dataset rows skipped (malformed)"),
    ("duplicates_ignored", "duplicate records ignored"),
)
_PER_LABEL = ("n", "label_acc", "verification_acc", "joint_acc", "evidence_score")


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _cell(v: Any) -> str:
    return _fmt(v).replace("|", "\\|")


def _check(metrics: Mapping[str, Any]) -> None:
    missing = [k for k in _REQUIRED if k not in metrics]
    if missing:
        raise ValueError(
            f"metrics dict lacks {', '.join(missing)}; expected the output of compute_metrics"
        )


def format_summary_line(metrics: Mapping[str, Any]) -> str:
    """One line, e.g. ``n=14 label_acc=0.500 verification_acc=0.357 joint_acc=0.286
    evidence_score=0.310 format_ok=0.929`` (``n/a`` where a rate is undefined)."""
    _check(metrics)
    parts = [f"n={_fmt(metrics['n'])}"]
    for key in ("label_acc", "verification_acc", "joint_acc", "evidence_score"):
        parts.append(f"{key}={_fmt(metrics[key])}")
    parts.append(f"format_ok={_fmt(metrics['format_ok_rate'])}")
    return " ".join(parts)


def format_failure_lines(metrics: Mapping[str, Any]) -> list[str]:
    """What failed, for the terminal: episodes that ended in an error (by type) and
    episodes with format failures (by kind); nothing when none did."""
    n = metrics.get("n") or 0
    out = []
    if metrics.get("errors"):
        out.append(f"episode errors: {metrics['errors']} of {n} episodes ({_counts(metrics.get('episode_errors') or {})})")
    kinds = metrics.get("format_failures") or {}
    if any(kinds.values()):
        many = metrics.get("episodes_with_format_failures")
        share = f"{many} of {n} episodes" if many is not None else f"{n} episodes"
        out.append(f"format failures: {share} ({_counts(kinds, words=True)})")
    return out


def _counts(counts: Mapping[str, int], *, words: bool = False) -> str:
    shown = [f"{k.replace('_', ' ') if words else k} {v}" for k, v in counts.items() if v]
    return ", ".join(shown) if shown else "none"


def _failure_lines(metrics: Mapping[str, Any]) -> list[str]:
    """Failures by kind and errors by type, one line each (absent in older runs)."""
    out: list[str] = []
    if "format_failures" in metrics:
        out.append(f"Format failures (episodes per kind): {_counts(metrics['format_failures'], words=True)}.")
    if "episode_errors" in metrics:
        out.append(f"Episode errors by type: {_counts(metrics['episode_errors'])}.")
    if "convention" in metrics:
        out.append(f"Judged under the reward convention: {metrics['convention']}.")
    if "evidence_convention" in metrics:
        out.append(f"Evidence score convention: {metrics['evidence_convention']}.")
    return ["", *(f"{line}  " for line in out[:-1]), *out[-1:]] if out else []


def _calibration_lines(cal: Mapping[str, Any] | None) -> list[str]:
    """Accuracy by Veri-R1's confidence tiers (§4.3) and ECE, when the run recorded
    label confidences."""
    if not cal:
        return []
    lines = [
        "",
        "## Confidence of the label (Veri-R1 §4.3)",
        "",
        f"{_fmt(cal.get('n'))} answers with a label probability; ECE {_fmt(cal.get('ece'))}, "
        f"MCE {_fmt(cal.get('mce'))} (10 equal-width bins).",
        "",
        "| predicted label | low (< 0.85) n | acc | middle n | acc | high (> 0.95) n | acc |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = {"all": cal.get("tiers") or {}, **(cal.get("tiers_by_predicted_label") or {})}
    for label, tiers in rows.items():
        cells = " | ".join(f"{_cell((tiers.get(t) or {}).get('n'))} | {_cell((tiers.get(t) or {}).get('accuracy'))}"
                           for t in ("low", "middle", "high"))
        lines.append(f"| {_cell(label)} | {cells} |")
    return lines


def metrics_markdown(metrics: Mapping[str, Any], *, title: str) -> str:
    """A compact report: overall table, per-gold-label table and the majority baseline."""
    _check(metrics)
    lines = [f"# {title}", "", "| metric | value |", "|---|---:|"]
    for key, name in _OVERALL:
        if key in metrics:
            lines.append(f"| {name} | {_cell(metrics[key])} |")
    lines += _failure_lines(metrics)

    per_label: Mapping[str, Mapping[str, Any]] = metrics.get("per_label") or {}
    if per_label:
        lines += [
            "",
            "## Per gold label",
            "",
            "| gold label | n | label acc | verification acc | joint acc | evidence score |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for label, row in per_label.items():
            cells = " | ".join(_cell(row.get(k)) for k in _PER_LABEL)
            lines.append(f"| {_cell(label)} | {cells} |")

    lines += _calibration_lines(metrics.get("calibration"))

    base = metrics.get("majority_baseline")
    if base is not None:
        lines.append("")
        if base.get("label") is None:
            lines.append("Majority baseline: n/a (no items).")
        else:
            lines.append(
                f"Majority baseline: always answering `{base['label']}` gives label accuracy "
                f"{_fmt(base.get('acc'))} (compare with label accuracy "
                f"{_fmt(metrics['label_acc'])})."
            )
    return "\n".join(lines) + "\n"
