"""``factrl score averitec``: the AVeriTeC shared task's scores of a submission file."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from factrl.cli.app import score_app


@score_app.command("averitec")
def averitec(
    predictions: Path = typer.Option(
        ..., "--predictions", exists=True, dir_okay=False,
        help="Submission JSON: a list of {claim_id, claim, pred_label, evidence: [{question, answer}]}.",
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
) -> None:
    """Q-only and Q+A Hungarian METEOR, label accuracy and the AVeriTeC score at 0.2/0.25/0.3."""
    from factrl.metrics.averitec import MAIN_CUTOFF, load_gold, load_predictions, score_averitec
    from factrl.metrics.meteor import WordNetMissingError

    try:
        preds, golds = load_predictions(predictions), load_gold(gold)
        if subset:
            if any(p.claim_id is None for p in preds):
                raise ValueError("--subset needs a claim_id on every prediction")
            named = {p.claim_id for p in preds}
            golds = [g for g in golds if g.claim_id in named]
        scores = score_averitec(preds, golds, allow_missing=allow_missing)
    except (ValueError, WordNetMissingError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    rows = [
        ("claims", str(scores.n)),
        ("Q-only METEOR", _fmt(scores.q_only)),
        ("Q+A METEOR", _fmt(scores.qa)),
        ("label accuracy", _fmt(scores.label_acc)),
        ("label macro-F1", _fmt(scores.label_macro_f1)),
    ]
    rows += [
        (f"AVeriTeC score @{lam}{' (main)' if lam == MAIN_CUTOFF else ''}", _fmt(v))
        for lam, v in sorted(scores.averitec.items())
    ]
    if scores.unknown_labels:
        rows.append(("unknown labels (wrong)", str(scores.unknown_labels)))
    if scores.missing:
        rows.append(("missing predictions (wrong)", str(scores.missing)))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        typer.echo(f"{k:<{width}}  {v}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(scores.to_dict(), indent=2) + "\n")
        typer.echo(f"wrote {out}")


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"
