"""Ev2R (the 2025 AVeriTeC scorer's LM-judged evidence recall): reading judge replies,
counting judge failures, and ``factrl score averitec --ev2r`` end to end against a
scripted judge, in process and behind the OpenAI-compatible server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("nltk")
pytest.importorskip("scipy")

from factrl.lm.scripted import ScriptedLM  # noqa: E402
from factrl.metrics import averitec as av  # noqa: E402
from factrl.metrics import averitec_ev2r as ev  # noqa: E402


def reply(pred: int, pred_sup: int, ref: int, ref_sup: int, noun: str = "evidence") -> str:
    return json.dumps({
        f"facts in predicted {noun}": "1. ...", f"facts count predicted {noun}": pred,
        f"support predicted {noun}": pred_sup, f"facts count reference {noun}": ref,
        f"support reference {noun}": ref_sup,
    })  # fmt: skip


def test_parse_judgement_reads_the_counts() -> None:
    j = ev.parse_judgement("Here you go:\n```json\n" + reply(4, 3, 5, 2) + "\n```")
    assert (j.precision, j.recall, j.failed) == (0.75, 0.4, False)
    assert j.counts == {"pred_facts": 4, "pred_support": 3, "ref_facts": 5, "ref_support": 2}
    q = ev.parse_judgement(reply(2, 1, 4, "4", noun="questions"), "question")  # type: ignore[arg-type]
    assert (q.precision, q.recall) == (0.5, 1.0)


@pytest.mark.parametrize(("text", "why"), [
    (None, "judge call failed"),
    ("I think the evidence is fine.", "no JSON object"),
    ('{"facts count predicted evidence": 2}', "is not a count"),
    (reply(2, 1, 0, 0), "is 0"),  # the official code divides by it
    (reply(2, 1, 3, 4), "exceeds its count"),
    (reply(2, -1, 3, 1), "is not a count"),
    (reply(2, 1.5, 3, 1), "is not a count"),
    (reply(2, True, 3, 1), "is not a count"),
    (reply(2, 1, 3, 1, noun="questions"), "is not a count"),  # the Q+A keys are missing
])  # fmt: skip
def test_unreadable_replies_are_failures_with_recall_zero(text: str | None, why: str) -> None:
    j = ev.parse_judgement(text)
    assert j.failed and why in (j.error or "") and (j.recall, j.precision) == (0.0, 0.0)


GOLD = [
    {"claim": "Claim zero.", "label": "Refuted", "justification": "j", "questions": [
        {"question": "GQ0?", "answers": [{"answer": "GA0"}, {"answer": "No", "answer_type": "Boolean",
                                                            "boolean_explanation": "GE0"}]},
        {"question": "GQ0b?", "answers": []}]},
    {"claim": "Claim one.", "label": "Supported", "justification": "j",
     "questions": [{"question": "GQ1?", "answers": [{"answer": "GA1"}]}]},
    {"claim": "Claim two.", "label": "Supported", "justification": "j",
     "questions": [{"question": "GQ2?", "answers": [{"answer": "GA2"}]}]},
    {"claim": "Claim three.", "label": "Refuted", "justification": "j",
     "questions": [{"question": "GQ3?", "answers": [{"answer": "GA3"}]}]},
]  # fmt: skip
PREDS = [
    {"claim_id": 0, "pred_label": "Refuted", "evidence": [{"question": "PQ0?", "answer": "PA0"},
                                                          {"question": "PQ0b?", "answer": ""}]},
    {"claim_id": 1, "pred_label": "Supported", "evidence": [{"question": "PQ1?", "answer": "PA1"}]},
    {"claim_id": 2, "pred_label": "Supported", "evidence": [{"question": "PQ2?", "answer": "PA2"}]},
    {"claim_id": 3, "pred_label": "Refuted", "evidence": []},  # nothing to judge
]  # fmt: skip

# Per claim text: the Q+A reply and the questions reply. Claim zero's recall 3/4 passes
# 0.5 with the right label; claim one's 2/4 does not pass (strictly greater); claim two's
# judge answers prose to the Q+A prompt: a failure, recall 0.
SCRIPT = {
    "Claim zero.": (reply(2, 2, 4, 3), reply(2, 1, 2, 1, noun="questions")),
    "Claim one.": (reply(1, 1, 4, 2), reply(1, 1, 1, 1, noun="questions")),
    "Claim two.": ("The evidence looks relevant.", reply(1, 0, 1, 0, noun="questions")),
}


class Judge(ScriptedLM):
    def __init__(self) -> None:
        self.prompts: list[str] = []
        super().__init__(self.answer)

    def answer(self, context: str) -> str:
        self.prompts.append(context)
        claim = re.search(r"Claim: (.*)", context).group(1)  # type: ignore[union-attr]
        qa, questions = SCRIPT[claim]
        return questions if "Reference questions:" in context else qa


def _files(tmp_path: Path) -> tuple[Path, Path]:
    gold, preds = tmp_path / "gold.json", tmp_path / "preds.json"
    gold.write_text(json.dumps(GOLD))
    preds.write_text(json.dumps(PREDS))
    return gold, preds


def _check(data: dict) -> None:
    assert data["n"] == 4 and data["judge_failures"] == {"qa": 1, "question": 0}
    assert data["qa_recall"] == pytest.approx((0.75 + 0.5 + 0 + 0) / 4)
    assert data["qa_precision"] == pytest.approx((1.0 + 1.0 + 0 + 0) / 4)
    assert data["q_only_recall"] == pytest.approx((0.5 + 1.0 + 0.0 + 0) / 4)
    assert data["averitec_score"] == 0.25 and data["main_cutoff"] == 0.5  # claim zero only
    per = data["per_claim"]
    assert per[2]["qa"]["error"] == "no JSON object in the reply" and per[3]["qa"]["counts"] == {}


def test_score_ev2r_with_a_scripted_judge(tmp_path: Path) -> None:
    gold, preds = _files(tmp_path)
    pairs, _ = av.pair_predictions(av.load_predictions(preds), av.load_gold(gold))
    judge = Judge()
    scores = ev.score_ev2r(judge, pairs, batch_size=2)
    _check(scores.to_dict())
    assert scores.judge == "scripted" and judge.calls == 3  # 6 prompts in batches of 2; claim three not sent
    qa_prompt = next(p for p in judge.prompts if "Claim zero." in p and "Reference evidence:" in p)
    # the 2025 scorer's evidence: reference pairs with Boolean explanations, unanswered
    # gold questions left out; predicted rows as written (an empty answer stays empty)
    assert "Question: GQ0?\nAnswer: GA0\n\nQuestion: GQ0?\nAnswer: No. GE0" in qa_prompt
    assert "GQ0b?" not in qa_prompt and "Question: PQ0b?\nAnswer: \n" in qa_prompt + "\n"
    q_prompt = next(p for p in judge.prompts if "Claim zero." in p and "Reference questions:" in p)
    assert "Reference questions:\nGQ0?\n" in q_prompt and "Predicted questions:\nPQ0? PQ0b?\n" in q_prompt


def test_a_judge_that_is_down_is_counted_not_raised(tmp_path: Path) -> None:
    gold, preds = _files(tmp_path)
    pairs, _ = av.pair_predictions(av.load_predictions(preds), av.load_gold(gold))

    def down(context: str) -> str:
        raise ConnectionError("judge unreachable")

    scores = ev.score_ev2r(ScriptedLM(down), pairs)
    assert scores.judge_failures == {"qa": 3, "question": 3} and scores.qa_recall == 0.0
    assert scores.averitec_score == 0.0


def _cli(args: list[str]):
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()
    return CliRunner().invoke(app, ["score", "averitec", *args])


def test_cli_ev2r_end_to_end(tmp_path: Path, wordnet_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from factrl.lm import loader

    loads: list[str] = []
    monkeypatch.setattr(loader, "load_lm", lambda model, **kw: loads.append(model) or Judge())
    gold, preds = _files(tmp_path)
    out = tmp_path / "scores.json"
    r = _cli(["--predictions", str(preds), "--gold", str(gold), "--ev2r", "--judge", "some/judge",
              "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert loads == ["some/judge"]
    assert re.search(r"new AVeriTeC score \(Ev2R\) @0\.5\s+0\.2500", r.output), r.output
    assert "judge failures (Q+A / Q-only)" in r.output
    data = json.loads(out.read_text())
    _check(data["ev2r"])
    assert data["label_acc"] == 1.0  # the METEOR scores stay beside it


def test_cli_ev2r_usage_errors(tmp_path: Path) -> None:
    gold, preds = _files(tmp_path)
    r = _cli(["--predictions", str(preds), "--gold", str(gold), "--ev2r"])
    assert r.exit_code == 2 and "--ev2r needs --judge" in r.output
    r = _cli(["--predictions", str(preds), "--gold", str(gold), "--judge", "x"])
    assert r.exit_code == 2 and "add --ev2r" in r.output
    r = _cli(["--predictions", str(preds), "--gold", str(gold), "--cutoffs", "0.2,high"])
    assert r.exit_code == 2 and "--cutoffs" in r.output


def test_cli_ev2r_with_an_openai_judge(tmp_path: Path, wordnet_root: Path) -> None:
    """``--judge openai:NAME`` against factrl's own OpenAI-compatible server, which serves
    the scripted judge over HTTP."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    pytest.importorskip("openai")
    from factrl.lm.server import create_lm_app

    from _support import AppServers

    servers = AppServers()
    try:
        url = servers.start(create_lm_app(Judge(), model_id="judge"))
        gold, preds = _files(tmp_path)
        out = tmp_path / "scores.json"
        r = _cli(["--predictions", str(preds), "--gold", str(gold), "--ev2r", "--judge", "openai:judge",
                  "--base-url", f"{url}/v1", "--out", str(out)])
        assert r.exit_code == 0, r.output
        data = json.loads(out.read_text())["ev2r"]
        _check(data)
        assert data["judge"] == "openai:judge"
    finally:
        servers.stop()
