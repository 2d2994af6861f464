"""An evaluation run on AVeriTeC claims writes the shared task's submission file beside
its trajectories and scores it; `factrl score averitec --subset` on that file gives the
same figures, and they agree with the profact reward's METEOR parts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("nltk")
pytest.importorskip("scipy")

from factrl.datasets import load_dataset  # noqa: E402
from factrl.datasets.pool import pool_evidence  # noqa: E402
from factrl.envs import EnvDeps, EnvSpec, build  # noqa: E402
from factrl.evaluate import evaluate  # noqa: E402
from factrl.lm.scripted import ScriptedLM  # noqa: E402
from factrl.metrics.averitec_submission import PREDICTIONS_FILE, stage_failure_counts, submission_row  # noqa: E402
from factrl.rollout import RolloutConfig  # noqa: E402
from factrl.types import Passage  # noqa: E402

from _support import REPO, WordOverlapRetriever  # noqa: E402

GOLD = REPO / "tests" / "fixtures" / "datasets" / "averitec" / "dev.json"


@pytest.fixture(autouse=True)
def wordnet(wordnet_root):
    """METEOR reads the session's offline WordNet (tests/metrics/conftest.py)."""
    return wordnet_root


def pooled_passages(claims):
    docs, _ = pool_evidence(claims)
    return [Passage(id=d.id, doc_id=d.id, title=d.title, text=" ".join(d.sentences), sentence_ids=d.sentence_ids,
                    sentences=d.sentences) for d in docs]


def gold_copying_model(claims):
    """Asks each claim's gold questions, answers from what it retrieved (the first
    line), and says 'Refuted' except on the second claim, where it writes no verdict."""
    by_text = {c.text: c for c in claims}

    def respond(context):
        if "Stage 3:" in context:
            return "<verdict>Refuted</verdict>" if claims[1].text not in context else "I cannot tell."
        if "Stage 1 (now)" in context:
            claim = next(c for t, c in by_text.items() if t in context)
            qs = [q["question"] for q in claim.meta["questions"]]
            return "<questions>\n" + "\n".join(f"{i}. {q}" for i, q in enumerate(qs, 1)) + "\n</questions>"
        if "\n<information>\n" in context:
            first = re.search(r"\[\[[^\]]+\]\]: (.*)", context.split("\n<information>\n")[-1])
            return f"<answer>{first[1] if first else 'nothing found'}</answer>"
        return "<search>" + re.search(r"Question: (.*)\n", context)[1] + "</search>"
    return respond


def test_eval_writes_and_scores_the_submission(tmp_path: Path):
    claims = load_dataset("averitec", GOLD, "dev").claims
    retriever = WordOverlapRetriever(pooled_passages(claims))
    make_env = lambda: build(EnvSpec(name="profact"), EnvDeps(retriever=retriever))  # noqa: E731
    out = tmp_path / "run"
    metrics = evaluate(claims[:3], make_env, ScriptedLM(gold_copying_model(claims)), out,
                       rollout=RolloutConfig(temperature=0), progress=False)
    rows = json.loads((out / PREDICTIONS_FILE).read_text())
    assert [r["claim_id"] for r in rows] == ["0", "1", "2"]
    assert rows[0]["pred_label"] == "Refuted" and rows[1]["pred_label"] is None
    assert [e["question"] for e in rows[0]["evidence"]] == [q["question"] for q in claims[0].meta["questions"]]
    assert all(e["answer"] for e in rows[0]["evidence"])
    av = metrics["averitec"]
    assert av["predictions"] == PREDICTIONS_FILE and av["n"] == 3
    gold_labels = [c.label.value for c in claims[:3]]
    assert av["label_acc"] == pytest.approx(sum(g == "REFUTE" for g in [gold_labels[0], gold_labels[2]]) / 3)
    assert 0 < av["q_only_meteor"] <= 1 and 0 < av["qa_meteor"] <= 1
    assert metrics["stage_failures"] == {"question": 0, "search": 0, "verdict": 1}
    assert json.loads((out / "metrics.json").read_text())["averitec"] == av

    # The reward's METEOR parts are the scorer's per-claim Q-only and Q+A (every question
    # was answered here, and at most 5 < 10 items are compared).
    trajs = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    assert mean([t["reward"]["components"]["question"] for t in trajs]) == pytest.approx(av["q_only_meteor"])
    assert mean([t["reward"]["components"]["qa"] for t in trajs]) == pytest.approx(av["qa_meteor"])

    # `factrl score averitec --subset` on the file, against dev.json: the same figures.
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()
    scores = tmp_path / "scores.json"
    r = CliRunner().invoke(app, ["score", "averitec", "--predictions", str(out / PREDICTIONS_FILE),
                                 "--gold", str(GOLD), "--subset", "--out", str(scores)])
    assert r.exit_code == 0, r.output
    cli = json.loads(scores.read_text())
    for key in ("n", "q_only_meteor", "qa_meteor", "label_acc", "averitec_score", "averitec_score_at"):
        assert cli[key] == pytest.approx(av[key]), key
    # Without --subset the claims the run did not cover are missing: an error, as before.
    r = CliRunner().invoke(app, ["score", "averitec", "--predictions", str(out / PREDICTIONS_FILE),
                                 "--gold", str(GOLD)])
    assert r.exit_code == 1 and "have no prediction" in r.output


def test_submission_rows_of_other_agents_and_unanswered_questions():
    from factrl.types import Claim, Trajectory, Verdict

    claim = Claim(id="9", text="c", label="SUPPORT")
    t = Trajectory(claim_id="9", env="direct", claim=claim, prompt=[], verdict=Verdict(label="CONFLICTING"))
    assert submission_row(t) == {"claim_id": "9", "claim": "c", "pred_label": "Conflicting Evidence/Cherrypicking",
                                 "evidence": []}
    t.meta["qa"] = [{"question": "q?", "answer": None}]
    assert submission_row(t)["evidence"] == [{"question": "q?", "answer": ""}]
    assert stage_failure_counts([t]) is None
