"""One self-contained HTML page for one or more evaluation runs.

The page needs nothing from the network: CSS and script are inline, plots are inline SVG.
Metric tables, confusion matrices and reliability diagrams are written here, every text
escaped; the trajectory browser is rendered by the page's script from an embedded JSON
blob, putting every string into the DOM as text. Items are built when opened, so a run
of thousands of trajectories stays light. Several runs are shown side by side, each
compared with the first (the reference).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from factrl.report._items import trajectory_item
from factrl.report._svg import reliability_svg
from factrl.report.markdown import _OVERALL
from factrl.runs.rundir import RunData, load_run, run_names

__all__ = ["html_report", "write_html_report"]

# Which way is better, for the colour of a difference: +1 higher, -1 lower, 0 neither.
_LOWER_BETTER = {"errors", "episodes_with_format_failures", "skipped_rows", "duplicates_ignored",
                 "seconds_per_claim", "episode_latency_s"}
_NEUTRAL = {"n"}
_EXTRA = (
    ("macro_precision", "macro precision"),
    ("macro_recall", "macro recall"),
    ("seconds_per_claim", "seconds per claim (throughput)"),
    ("episode_latency_s", "episode latency (s)"),
)
_PER_LABEL = (("n", "items"), ("label_acc", "label accuracy"), ("verification_acc", "verification accuracy"),
              ("joint_acc", "joint accuracy"), ("evidence_score", "evidence score"))
_PER_HOPS = (("n", "items"), ("accuracy", "accuracy"), ("macro_precision", "macro precision"),
             ("macro_recall", "macro recall"), ("macro_f1", "macro-F1"))

Row = tuple[str, list[Any], int]  # name, value per run, direction (+1, -1, 0)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool) or isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.3f}" if math.isfinite(v) else str(v)
    return str(v)


def _value_cell(v: Any) -> str:
    title = f' title="{escape(repr(v))}"' if isinstance(v, float) else ""
    return f'<td class="num"{title}>{escape(_fmt(v))}</td>'


def _delta_cell(ref: Any, v: Any, direction: int) -> str:
    a, b = _num(ref), _num(v)
    if a is None or b is None:
        return '<td class="num delta">–</td>'
    d = b - a
    ints = isinstance(ref, int) and isinstance(v, int)
    text = f"{int(d):+d}" if ints else f"{d:+.3f}"
    if text.lstrip("+-").strip("0.") == "":
        return f'<td class="num delta">{"0" if ints else "0.000"}</td>'
    cls = "better" if d * direction > 0 else "worse" if d * direction < 0 else ""
    return f'<td class="num delta {cls}">{escape(text.replace("-", "−"))}</td>'


def _compare_table(runs: Sequence[RunData], groups: Sequence[tuple[str, Sequence[Row]]], first: str) -> str:
    """Rows of values, one column per run and, after each run but the first, its
    difference from the first; ``groups`` with a name get a header row."""
    head = [f"<th>{escape(first)}</th>"]
    for i, r in enumerate(runs):
        head.append(f'<th class="num">{escape(r.name)}</th>')
        if i:
            head.append(f'<th class="num delta" title="{escape(r.name)} minus {escape(runs[0].name)}">Δ</th>')
    body = []
    width = 1 + 2 * len(runs) - 1
    for group, rows in groups:
        if group:
            body.append(f'<tr class="grp"><th colspan="{width}">{escape(group)}</th></tr>')
        for name, values, direction in rows:
            cells = [f"<th>{escape(name)}</th>"]
            for i, v in enumerate(values):
                cells.append(_value_cell(v))
                if i:
                    cells.append(_delta_cell(values[0], v, direction))
            body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table class="cmp"><thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _direction(key: str) -> int:
    return -1 if key in _LOWER_BETTER else 0 if key in _NEUTRAL else 1


def _overall_rows(runs: Sequence[RunData]) -> list[Row]:
    rows: list[Row] = []
    for key, name in (*_OVERALL, *_EXTRA):
        values = [r.metrics.get(key) for r in runs]
        if any(v is not None and not isinstance(v, (dict, list)) for v in values):
            rows.append((name, values, _direction(key)))
    base = [(r.metrics.get("majority_baseline") or {}) for r in runs]
    if any(b.get("acc") is not None for b in base):
        labels = {b.get("label") for b in base if b.get("label")}
        name = f"majority baseline ({', '.join(sorted(labels))})" if labels else "majority baseline"
        rows.append((name, [b.get("acc") for b in base], 0))
    return rows


def _keys(runs: Sequence[RunData], field: str) -> list[str]:
    """The keys of a dict-valued metric over every run, first run's order first."""
    out: list[str] = []
    for r in runs:
        for k in r.metrics.get(field) or {}:
            if k not in out:
                out.append(k)
    return out


def _nested_groups(runs: Sequence[RunData], field: str, spec: Sequence[tuple[str, str]],
                   group_name: Callable[[str], str]) -> list[tuple[str, list[Row]]]:
    groups = []
    for key in _keys(runs, field):
        cells = [(r.metrics.get(field) or {}).get(key) or {} for r in runs]
        rows = [(name, [c.get(m) for c in cells], _direction(m)) for m, name in spec]
        groups.append((group_name(key), rows))
    return groups


def _failure_groups(runs: Sequence[RunData]) -> list[tuple[str, list[Row]]]:
    groups = []
    for field, title in (("format_failures", "format failures (episodes per kind)"),
                         ("episode_errors", "episode errors (by stage/type)")):
        keys = _keys(runs, field)
        if keys:
            rows = [(k.replace("_", " ") if field == "format_failures" else k,
                     [(r.metrics.get(field) or {}).get(k, 0 if field in r.metrics else None) for r in runs], -1)
                    for k in keys]
            groups.append((title, rows))
    return groups


_SETTINGS = ("dataset", "split", "model", "agent", "reward", "index", "temperature", "max_new_tokens",
             "seed", "limit", "balanced", "context_sentences")


def _setting(info: Mapping[str, Any], key: str) -> str:
    v = info.get(key)
    if key in ("agent", "reward") and isinstance(v, dict):
        params = v.get("params")
        if isinstance(params, dict):
            params = ", ".join(f"{k}={p}" for k, p in params.items())
        elif isinstance(params, list):
            params = ", ".join(map(str, params))
        return f"{v.get('name', '?')}" + (f" ({params})" if params else "")
    if key == "index" and v:
        retr = (info.get("index_info") or {}).get("retriever")
        return f"{v} ({retr})" if retr else str(v)
    return "" if v is None else str(v)


def _runs_table(runs: Sequence[RunData]) -> str:
    head = "".join(f"<th>{escape(r.name)}</th>" for r in runs)
    rows = [("directory", [str(r.path) for r in runs]),
            ("trajectories", [str(len(r.trajectories)) for r in runs])]
    for key in _SETTINGS:
        values = [_setting(r.info, key) for r in runs]
        if any(values):
            rows.append((key.replace("_", " "), values))
    body = []
    for name, values in rows:
        cells = "".join(
            f'<td class="{"differs" if i and v != values[0] and name != "directory" else ""}">{escape(v)}</td>'
            for i, v in enumerate(values))
        body.append(f"<tr><th>{escape(name)}</th>{cells}</tr>")
    notes = [f'<p class="note">{escape(r.name)}: no metrics.json (a run still going?); metrics computed '
             f"from its {len(r.trajectories)} trajectories.</p>" for r in runs if r.metrics_computed]
    return f'<table class="runs"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>' \
        + "".join(notes)


def _confusion(run: RunData) -> str:
    from factrl.metrics.classification import confusion_matrix, ordered_labels

    scored = [t for t in run.trajectories if t.claim.label is not None]
    gold = [t.claim.label for t in scored]
    pred = [None if t.error is not None else t.verdict.label for t in scored]
    if not scored:
        return f'<div class="cm"><h3>{escape(run.name)}</h3><p class="note">No trajectories.</p></div>'
    cm = confusion_matrix(gold, pred, ordered_labels([*gold, *pred]))
    head = "".join(f'<th class="num">{escape(str(lab.value))}</th>' for lab in cm.labels)
    rows = []
    for i, g in enumerate(cm.labels):
        total = sum(cm.counts[i]) + cm.unparsed[i]
        if not total:
            continue
        cells = []
        for j, n in enumerate((*cm.counts[i], cm.unparsed[i])):
            share = n / total
            cls = "diag" if j == i else "off"
            cells.append(f'<td class="num {cls}" style="--share:{share:.3f}" '
                         f'title="{n} of {total} ({share:.0%})">{n}</td>')
        rows.append(f'<tr><th>{escape(g.value)}</th>{"".join(cells)}<td class="num total">{total}</td></tr>')
    return (f'<div class="cm"><h3>{escape(run.name)}</h3><table class="confusion"><thead>'
            f'<tr><th class="corner">gold ↓ / predicted →</th>{head}<th class="num">no label</th>'
            f'<th class="num">total</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _reliability(run: RunData) -> str:
    from factrl.metrics.confidence import calibration, confidence_pairs

    try:
        pairs = confidence_pairs(t for t in run.trajectories if t.claim.label is not None)
        cal = calibration(pairs, 10) if pairs else None
    except (ValueError, TypeError) as exc:
        return f'<div class="cm"><h3>{escape(run.name)}</h3><p class="note">Confidences unusable: {escape(str(exc))}</p></div>'
    if cal is None:
        return (f'<div class="cm"><h3>{escape(run.name)}</h3><p class="note">No confidences were recorded '
                f'(no trajectory has <code>meta["confidence"]</code>).</p></div>')
    svg = reliability_svg(cal, label=f"reliability diagram of {run.name}")
    return f'<div class="cm"><h3>{escape(run.name)}</h3>{svg}</div>'


def _finite(obj: Any) -> Any:
    """JSON.parse refuses NaN and Infinity: make them null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _data_blob(runs: Sequence[RunData]) -> str:
    data = {"runs": [{"name": r.name, "items": [trajectory_item(t) for t in r.trajectories]} for r in runs]}
    text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"))
    # Inside <script>, "</script>" or "<!--" in a string would end or alter the element;
    # \u escapes keep the JSON the same and the markup inert.
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _asset(name: str) -> str:
    return resources.files("factrl.report").joinpath("assets", name).read_text(encoding="utf-8")


def _section(anchor: str, title: str, body: str, *, side: bool = False) -> str:
    cls = ' class="side"' if side else ""  # narrow tables sit side by side
    return f'<section id="{anchor}"{cls}><h2>{escape(title)}</h2>{body}</section>'


def html_report(runs: Sequence[RunData], *, title: str | None = None) -> str:
    """The page for ``runs`` (the first is the reference of every difference)."""
    if not runs:
        raise ValueError("a report needs at least one run")
    from factrl import __version__

    if title is None:
        ds = runs[0].info.get("dataset")
        title = f"Evaluation: {ds}" if ds else "Evaluation report"
    first = "metric"
    sections = [_section("runs", "Runs", _runs_table(runs)),
                _section("overall", "Overall", _compare_table(runs, [("", _overall_rows(runs))], first))]
    per_label = _nested_groups(runs, "per_label", _PER_LABEL, lambda k: f"gold {k}")
    if per_label:
        sections.append(_section("per-label", "Per gold label", _compare_table(runs, per_label, first), side=True))
    per_hops = _nested_groups(runs, "per_hops", _PER_HOPS, lambda k: f"{k} hops")
    if per_hops:
        sections.append(_section("per-hops", "Per hop count", _compare_table(runs, per_hops, first), side=True))
    failures = _failure_groups(runs)
    if failures:
        sections.append(_section("failures", "Failures", _compare_table(runs, failures, first), side=True))
    sections.append(_section("confusion", "Confusion matrix",
                             '<p class="note">Rows: gold label; columns: predicted label, "no label" when none '
                             'was parsed or the episode ended in an error.</p>'
                             f'<div class="row">{"".join(_confusion(r) for r in runs)}</div>'))
    sections.append(_section("calibration", "Reliability (confidence vs accuracy)",
                             '<p class="note">Ten equal-width confidence bins; bars reach each bin\'s '
                             'accuracy, dots sit at its mean confidence; the diagonal is perfect calibration.</p>'
                             f'<div class="row">{"".join(_reliability(r) for r in runs)}</div>'))
    sections.append(_section("trajectories", "Trajectories", _asset("browser.html")))
    nav = "".join(f'<a href="#{a}">{escape(t)}</a>' for a, t in (
        ("runs", "runs"), ("overall", "overall"), *([("per-label", "per label")] if per_label else []),
        *([("per-hops", "per hops")] if per_hops else []), *([("failures", "failures")] if failures else []),
        ("confusion", "confusion"), ("calibration", "reliability"), ("trajectories", "trajectories")))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    ref = f" Differences (Δ) are against {escape(runs[0].name)}." if len(runs) > 1 else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f'<header><h1>{escape(title)}</h1><p class="meta">factrl {escape(__version__)} · {stamp} · '
        f"{len(runs)} run{'s' if len(runs) > 1 else ''}.{ref}</p><nav>{nav}</nav></header><main>"
        + "".join(sections)
        + f'</main><script type="application/json" id="report-data">{_data_blob(runs)}</script>'
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def write_html_report(run_dirs: Sequence[Path], out: Path, *, title: str | None = None) -> Path:
    """Read the run directories and write their report to ``out``."""
    names = run_names(run_dirs)
    runs = [load_run(Path(d), name=n) for d, n in zip(run_dirs, names)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html_report(runs, title=title), encoding="utf-8")
    tmp.replace(out)
    return out
