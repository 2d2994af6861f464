"""``factrl score averitec``: the AVeriTeC shared task's scores of a prediction file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from factrl.cli.app import score_app

CUTOFFS_HELP = ("Cutoffs of the AVeriTeC score, comma-separated (default 0.2,0.25,0.3; `official` for the "
                "levels eval.py prints: 0.1,0.2,0.25,0.3,0.4,0.5).")
JUDGE_HELP = ("The Ev2R judge: any LM factrl loads (a hub id, a local directory, smollm2, or openai:MODEL for a "
              "model behind an OpenAI-compatible API, with --base-url for a server other than OpenAI's).")


@score_app.command("averitec")
def averitec(
    predictions: Path = typer.Option(
        ..., "--predictions", exists=True, dir_okay=False,
        help="Prediction JSON: the shared task's rows {claim_id, claim, pred_label, evidence: [{question, answer}]} "
             "or eval.py's {label, questions: [{question, answers}]}.",
    ),
    gold: Path = typer.Option(
        ..., "--gold", exists=True, dir_okay=False, help="AVeriTeC gold file, e.g. dev.json."
    ),
    out: Path = typer.Option(None, "--out", help="Write the scores (with per-claim scores) as JSON here."),
    allow_missing: bool = typer.Option(
        False, "--allow-missing", help="Score gold claims without a prediction as wrong instead of failing."
    ),
    subset: bool = typer.Option(
        False, "--subset",
        help="Score only the gold claims the predictions name by claim_id (e.g. an eval run with --limit).",
    ),
    cutoffs: str = typer.Option("0.2,0.25,0.3", "--cutoffs", help=CUTOFFS_HELP),
    ev2r: bool = typer.Option(
        False, "--ev2r", help="Also the 2025 shared task's Ev2R recall and new AVeriTeC score (needs --judge)."
    ),
    judge: str = typer.Option(None, "--judge", help=JUDGE_HELP),
    base_url: str = typer.Option(None, "--base-url", help="Server of an openai:MODEL judge."),
    judge_max_tokens: int = typer.Option(2048, "--judge-max-tokens", min=1, help="Longest judge reply."),
    judge_batch: int = typer.Option(16, "--judge-batch", min=1, help="Judge prompts sent together."),
) -> None:
    """Q-only and Q+A Hungarian METEOR, label accuracy and F1, the justification score and
    the AVeriTeC score at each cutoff, as the official eval.py computes them; with --ev2r,
    the 2025 scorer's Ev2R recalls and new AVeriTeC score under an LM judge."""
    from factrl.metrics.averitec import MAIN_CUTOFF, load_gold, load_predictions, pair_predictions, score_averitec
    from factrl.metrics.meteor import WordNetMissingError

    levels = _cutoffs(cutoffs)
    if ev2r and not judge:
        raise typer.BadParameter("--ev2r needs --judge MODEL", param_hint="--judge")
    if judge and not ev2r:
        raise typer.BadParameter("--judge is the Ev2R judge; add --ev2r", param_hint="--judge")
    try:
        preds, golds = load_predictions(predictions), load_gold(gold)
        if subset:
            if any(p.claim_id is None for p in preds):
                raise ValueError("--subset needs a claim_id on every prediction")
            named = {p.claim_id for p in preds}
            golds = [g for g in golds if g.claim_id in named]
        scores = score_averitec(preds, golds, cutoffs=levels, allow_missing=allow_missing)
    except (ValueError, WordNetMissingError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    rows = [
        ("claims", str(scores.n)),
        ("Q-only METEOR", _fmt(scores.q_only)),
        ("Q+A METEOR", _fmt(scores.qa)),
        ("label accuracy", _fmt(scores.label_acc)),
        ("label macro-F1", _fmt(scores.label_macro_f1)),
        ("justification METEOR", _fmt(scores.justification)),
    ]
    rows += [
        (f"AVeriTeC score @{lam}{' (main)' if lam == MAIN_CUTOFF else ''}", _fmt(v))
        for lam, v in sorted(scores.averitec.items())
    ]
    if scores.unknown_labels:
        rows.append(("unknown labels (wrong)", str(scores.unknown_labels)))
    if scores.missing:
        rows.append(("missing predictions (wrong)", str(scores.missing)))
    data: dict[str, Any] = scores.to_dict()
    if ev2r:
        pairs, _ = pair_predictions(preds, golds, allow_missing)
        ev = _ev2r(judge, base_url, pairs, judge_max_tokens, judge_batch)
        data["ev2r"] = ev.to_dict()
        rows += [
            ("Ev2R Q-only recall", _fmt(ev.q_recall)),
            ("Ev2R Q+A recall", _fmt(ev.qa_recall)),
            *[(f"new AVeriTeC score (Ev2R) @{lam}", _fmt(v)) for lam, v in sorted(ev.averitec.items())],
            ("judge failures (Q+A / Q-only)", f"{ev.judge_failures['qa']} / {ev.judge_failures['question']}"),
        ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        typer.echo(f"{k:<{width}}  {v}")
    typer.echo(f"convention: {data['convention']}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=2) + "\n")
        typer.echo(f"wrote {out}")


def _cutoffs(text: str) -> tuple[float, ...]:
    from factrl.metrics.averitec import OFFICIAL_CUTOFFS

    if text.strip().lower() == "official":
        return OFFICIAL_CUTOFFS
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"expected numbers separated by commas, got {text!r}",
                                 param_hint="--cutoffs") from None
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise typer.BadParameter(f"cutoffs must lie in [0, 1], got {text!r}", param_hint="--cutoffs")
    return values


def _ev2r(judge: str, base_url: str | None, pairs: list, max_tokens: int, batch: int) -> Any:
    from factrl.cli._common import device_options, lm_options
    from factrl.lm.loader import LMLoadError, load_lm, remote_backend
    from factrl.metrics.averitec_ev2r import score_ev2r

    opts = lm_options(judge, base_url)
    local = device_options(None, None, [judge]) if remote_backend(judge) is None else {}
    try:
        lm = load_lm(judge, **opts, **local)
    except LMLoadError as exc:
        raise typer.BadParameter(str(exc), param_hint="--judge") from None
    return score_ev2r(lm, pairs, max_tokens=max_tokens, batch_size=batch)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"
