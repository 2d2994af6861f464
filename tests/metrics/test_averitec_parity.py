"""Parity with the official AVeriTeC scorer, claim by claim.

The expected figures were computed once by running the official ``eval.py`` of the
AVeriTeC dataset repository outside this project (nltk's ``word_tokenize`` with the same
English Punkt tables, WordNet 3.0) on each prediction file and on each of its claims
alone; they are committed as numbers (fixtures/averitec_parity/expected_*.json, their
``source`` says how). Fixtures:

- ``gold.json`` + ``predictions_evalpy.json`` (eval.py's own format: several answers per
  question, Boolean answers, ``string_evidence`` without questions, more than 10
  questions, a question without answers, a predicted justification, no questions) and
  ``predictions_submission.json`` (the shared task's format: empty, whitespace, null and
  missing answers, more than 10 rows, no rows), texts written for these tests with
  abbreviations where Punkt and a rule split sentences differently;
- ``dev_predictions.json``: 40 AVeriTeC dev claims with their gold questions, answers
  kept, shuffled across claims or left empty, labels partly wrong — scored against
  ``dev.json`` from the shared benchmark data (skipped where it is absent).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("nltk")
pytest.importorskip("scipy")

from factrl.metrics import averitec as av  # noqa: E402
from factrl.metrics import meteor as mt  # noqa: E402
from factrl.metrics import punkt  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "averitec_parity"
TOL = 1e-6


@pytest.fixture
def exact_tokenizer(wordnet_root: Path) -> None:
    """The official tokens: word_tokenize with the package's Punkt model (the meteor
    extra). Without the package the test skips; with it, anything else is a failure."""
    pytest.importorskip("punkt.data.english", reason=f"{punkt.PUNKT_PACKAGE} not installed (the meteor extra)")
    mt.clear_caches()
    assert punkt.tokenizer_is_exact(), punkt.tokenizer_name()


def _check(scores: av.AveritecScores, expected: dict[str, Any]) -> None:
    per = expected["per_claim"]
    assert [c.claim_id for c in scores.per_claim] == [e["claim_id"] for e in per]
    for c, e in zip(scores.per_claim, per):
        assert c.q_only == pytest.approx(e["q_only"], abs=TOL), ("Q-only", c.claim_id)
        assert c.qa == pytest.approx(e["qa"], abs=TOL), ("Q+A", c.claim_id)
        assert c.justification == pytest.approx(e["justification"], abs=TOL), ("justification", c.claim_id)
        assert c.label_correct == e["label_correct"], ("label", c.claim_id)
        for lam, v in e["averitec_at"].items():  # the claim alone: 1 or 0 at each cutoff
            assert float(c.label_correct and c.qa > float(lam)) == v, ("AVeriTeC", c.claim_id, lam)
    o = expected["overall"]
    assert scores.q_only == pytest.approx(o["q_only"], abs=TOL)
    assert scores.qa == pytest.approx(o["qa"], abs=TOL)
    assert scores.label_acc == pytest.approx(o["label_acc"], abs=TOL)
    assert scores.label_macro_f1 == pytest.approx(o["label_macro_f1"], abs=TOL)
    assert scores.label_f1 == pytest.approx(o["label_f1"], abs=TOL)
    assert scores.justification == pytest.approx(o["justification"], abs=TOL)
    assert {str(k): v for k, v in scores.averitec.items()} == pytest.approx(o["averitec_at"], abs=TOL)
    assert {str(k): v for k, v in scores.justification_at.items()} == pytest.approx(o["justification_at"], abs=TOL)


def _score(pred_path: Path, gold_path: Path) -> av.AveritecScores:
    preds = av.load_predictions(pred_path)
    golds = av.load_gold(gold_path)
    named = {p.claim_id for p in preds}
    return av.score_averitec(preds, [g for g in golds if g.claim_id in named], cutoffs=av.OFFICIAL_CUTOFFS)


@pytest.mark.parametrize("fmt", ["evalpy", "submission"])
def test_scores_equal_the_official_scorer(fmt: str, exact_tokenizer: None) -> None:
    expected = json.loads((FIXTURES / f"expected_{fmt}.json").read_text())
    _check(_score(FIXTURES / f"predictions_{fmt}.json", FIXTURES / "gold.json"), expected)


@pytest.mark.data
def test_dev_predictions_equal_the_official_scorer(shared_data: Path, exact_tokenizer: None) -> None:
    gold = shared_data / "averitec" / "dev.json"
    if not gold.is_file():
        pytest.skip(f"{gold} not found")
    expected = json.loads((FIXTURES / "dev_expected.json").read_text())
    _check(_score(FIXTURES / "dev_predictions.json", gold), expected)


def test_cli_reports_the_official_figures(tmp_path: Path, exact_tokenizer: None) -> None:
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()
    out = tmp_path / "scores.json"
    r = CliRunner().invoke(app, ["score", "averitec", "--predictions", str(FIXTURES / "predictions_submission.json"),
                                 "--gold", str(FIXTURES / "gold.json"), "--cutoffs", "official", "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    o = json.loads((FIXTURES / "expected_submission.json").read_text())["overall"]
    assert data["qa_meteor"] == pytest.approx(o["qa"], abs=TOL)
    assert data["q_only_meteor"] == pytest.approx(o["q_only"], abs=TOL)
    assert data["justification_meteor"] == pytest.approx(o["justification"], abs=TOL)
    assert data["averitec_score_at"] == pytest.approx(o["averitec_at"], abs=TOL)
    assert "No answer could be found" in data["convention"] and punkt.PUNKT_PACKAGE in data["convention"]
    assert "AVeriTeC score @0.5" in r.output and "convention:" in r.output
