"""Trivial AVeriTeC submissions scored like the shared task (``factrl score averitec``).

Writes, from the gold file, three submission files and scores each:
``majority_no_evidence`` (every claim Refuted, the dev set's majority label, no QA),
``majority_gold_questions`` (Refuted, with the gold questions and empty answers) and
``gold_qa_majority`` (the gold questions and answers, label always Refuted). They bound
what the evidence and label parts of the score can give on their own.

    .venv/bin/python benchmarks/averitec_trivial.py --gold ../shared/data/averitec/dev.json --out runs/averitec
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from factrl.metrics.averitec import load_gold, load_predictions, score_averitec


def _qa(record: dict, answers: bool) -> list[dict]:
    """One item per gold question (empty answer), or per gold answer written the way the
    official scorer writes gold Q+A strings (a Boolean answer with its explanation)."""
    out = []
    for q in record.get("questions") or []:
        golds = q.get("answers") or [] if answers else []
        if not golds:
            out.append({"question": q.get("question", ""), "answer": ""})
        for a in golds:
            text = a.get("answer", "")
            if a.get("answer_type") == "Boolean" and "boolean_explanation" in a:
                text += ". " + a["boolean_explanation"]
            out.append({"question": q.get("question", ""), "answer": text})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gold", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    records = json.loads(args.gold.read_text())
    gold = load_gold(args.gold)
    args.out.mkdir(parents=True, exist_ok=True)
    variants = {
        "majority_no_evidence": lambda r: [],
        "majority_gold_questions": lambda r: _qa(r, answers=False),
        "gold_qa_majority": lambda r: _qa(r, answers=True),
    }
    for name, evidence in variants.items():
        preds = [{"claim_id": i, "claim": r["claim"], "pred_label": "Refuted", "evidence": evidence(r)}
                 for i, r in enumerate(records)]
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(preds))
        scores = score_averitec(load_predictions(path), gold).to_dict(per_claim=False)
        (args.out / f"{name}.scores.json").write_text(json.dumps(scores, indent=2))
        keep = ("n", "q_only_meteor", "qa_meteor", "label_acc", "averitec_score_at")
        print(name, json.dumps({k: scores[k] for k in keep}), flush=True)


if __name__ == "__main__":
    main()
