"""AVeriTeC submissions from trajectories, scored with the official scorer's code
(:mod:`factrl.metrics.averitec`).

A submission row is the shared task's ``{claim_id, claim, pred_label, evidence:
[{question, answer}]}``. ``pred_label`` is the AVeriTeC spelling of the verdict's label
(``null`` when the episode gave none: scored wrong); ``evidence`` lists the episode's
question–answer pairs from ``meta["qa"]`` (ProFact), every question asked, with an empty
answer where the search stage gave none (scored as the official ``eval.py`` scores a
question without answers: ``question + " No answer could be found."``); agents without
such pairs submit no evidence.

Gold comes from the claims themselves: the AVeriTeC loader keeps each claim's questions
and answers in ``meta["questions"]``, from which :func:`gold_from_claim` builds exactly the
strings :func:`factrl.metrics.averitec.load_gold` builds from ``dev.json``. So an
evaluation run scores its own claims (``--limit`` included), and
``factrl score averitec --predictions averitec_predictions.json --gold dev.json --subset``
gives the same figures.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factrl.protocol.profact import AVERITEC_LABELS
from factrl.metrics.averitec import AveritecScores, load_predictions, score_averitec
from factrl.metrics.averitec_format import AveritecGold, comparison_strings, qa_pairs
from factrl.types import Claim, Trajectory

__all__ = [
    "PREDICTIONS_FILE",
    "PER_CLAIM_FILE",
    "gold_questions",
    "gold_qa_strings",
    "gold_from_claim",
    "has_averitec_gold",
    "submission_row",
    "write_submission",
    "score_submission",
    "stage_failure_counts",
    "averitec_run_metrics",
]

PREDICTIONS_FILE = "averitec_predictions.json"
PER_CLAIM_FILE = "averitec_per_claim.jsonl"  # one scored claim a line (claim_id, q_only, qa, ...)


def has_averitec_gold(claim: Claim) -> bool:
    """Whether the claim carries AVeriTeC-style gold questions (``meta["questions"]``)."""
    qs = claim.meta.get("questions")
    return isinstance(qs, list) and bool(qs) and all(isinstance(q, dict) and "question" in q for q in qs)


def gold_questions(claim: Claim) -> list[str]:
    """The gold verification questions of an AVeriTeC claim."""
    return [q["question"] for q in claim.meta.get("questions") or []]


def gold_qa_strings(claim: Claim) -> list[str]:
    """The gold Q+A comparison strings, as the official scorer builds them."""
    return comparison_strings({"questions": claim.meta.get("questions") or []})


def gold_from_claim(claim: Claim) -> AveritecGold:
    if claim.label is None:
        raise ValueError(f"claim {claim.id!r} has no gold label")
    just = claim.meta.get("justification")
    return AveritecGold(claim_id=claim.id, label=claim.label, questions=tuple(gold_questions(claim)),
                        qa_strings=tuple(gold_qa_strings(claim)),
                        justification=just if isinstance(just, str) else None,
                        qa_pairs=tuple(qa_pairs({"questions": claim.meta.get("questions") or []}, unanswered=False)),
                        claim=claim.text)


def submission_row(traj: Trajectory) -> dict[str, Any]:
    label = traj.verdict.label
    evidence = [{"question": str(qa.get("question") or ""), "answer": str(qa.get("answer") or "")}
                for qa in traj.meta.get("qa") or [] if isinstance(qa, dict)]
    return {"claim_id": traj.claim_id, "claim": traj.claim.text,
            "pred_label": AVERITEC_LABELS.get(label) if label is not None else None, "evidence": evidence}


def write_submission(trajs: Sequence[Trajectory], path: Path) -> Path:
    """Write the trajectories' submission file (one row per trajectory, in order)."""
    path.write_text(json.dumps([submission_row(t) for t in trajs], indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return path


def score_submission(path: Path, claims: Sequence[Claim]) -> AveritecScores:
    """Score a submission file against the gold of ``claims`` (the claims it covers)."""
    golds = [gold_from_claim(c) for c in claims]
    return score_averitec(load_predictions(path), golds, allow_missing=False)


def stage_failure_counts(trajs: Sequence[Trajectory]) -> dict[str, int] | None:
    """Episodes with at least one format error in each stage (``meta["stage_errors"]``,
    which multi-stage agents such as ProFact record); None when no trajectory has any."""
    staged = [t.meta["stage_errors"] for t in trajs if isinstance(t.meta.get("stage_errors"), dict)]
    if not staged:
        return None
    stages = list(dict.fromkeys(s for errs in staged for s in errs))
    return {s: sum(1 for errs in staged if errs.get(s)) for s in stages}


def averitec_run_metrics(out_dir: Path, trajs: Sequence[Trajectory]) -> dict[str, Any]:
    """For an evaluation run on AVeriTeC claims, or a staged (ProFact) run on claims that
    carry AVeriTeC-style gold (a generated world's): write ``averitec_predictions.json``
    and the per-claim scores (``averitec_per_claim.jsonl``), and return ``{"averitec":
    scores, "stage_failures": counts}`` for ``metrics.json`` (only the keys that apply;
    nothing for other runs)."""
    out: dict[str, Any] = {}
    stages = stage_failure_counts(trajs)
    if stages is not None:
        out["stage_failures"] = stages
    if not trajs or not all(t.claim.label is not None and has_averitec_gold(t.claim) for t in trajs):
        return out
    if stages is None and not all(t.claim.dataset == "averitec" for t in trajs):
        return out
    from factrl.metrics.meteor import WordNetMissingError

    path = write_submission(trajs, out_dir / PREDICTIONS_FILE)
    try:
        scores = score_submission(path, [t.claim for t in trajs]).to_dict(per_claim=True)
    except WordNetMissingError as exc:  # the predictions are written; say why there is no score
        scores = {"error": f"not scored: {exc}"}
    per_claim = scores.pop("per_claim", None)
    if per_claim is not None:
        (out_dir / PER_CLAIM_FILE).write_text("".join(json.dumps(row) + "\n" for row in per_claim))
        scores["per_claim_file"] = PER_CLAIM_FILE
    out["averitec"] = {"predictions": PREDICTIONS_FILE, **scores}
    return out
