"""The AVeriTeC scorer: Hungarian matching, the official strings, cutoffs, the CLI, and
AVeriTeC dev scored against itself."""

from __future__ import annotations

import json
from itertools import permutations
from pathlib import Path

import pytest

pytest.importorskip("nltk")
pytest.importorskip("scipy")

from factrl.labels import Label  # noqa: E402
from factrl.metrics import averitec as av  # noqa: E402
from factrl.metrics import meteor as mt  # noqa: E402

# ---- matching and normalisation, with a table metric -----------------------------------

TABLE = {
    ("a", "x"): 0.9, ("a", "y"): 0.8,
    ("b", "x"): 0.7, ("b", "y"): 0.1,
    ("c", "x"): 0.2, ("c", "y"): 0.3,
}  # fmt: skip


def table(h: str, r: str) -> float:
    return TABLE.get((h, r), 0.0)


def test_matching_is_optimal_not_greedy() -> None:
    # Greedy takes a-x (0.9) then c-y (0.3) = 1.2; the best one-to-one matching is
    # a-y + b-x = 1.5, divided by the 2 gold items.
    assert av.best_matching_meteor(["a", "b", "c"], ["x", "y"], metric=table) == pytest.approx(0.75)


def test_normalised_by_gold_count() -> None:
    # One prediction, three gold items: the unmatched gold items count 0.
    assert av.best_matching_meteor(["a"], ["x", "q", "r"], metric=table) == pytest.approx(0.9 / 3)
    # Extra predictions cost nothing: c adds no matched pair.
    assert av.best_matching_meteor(["a", "b"], ["x", "y"], metric=table) == pytest.approx((0.8 + 0.7) / 2)
    # max_pred keeps the first predictions only: b, c dropped -> a-x alone, over 2 gold.
    assert av.best_matching_meteor(["a", "b", "c"], ["x", "y"], metric=table, max_pred=1) == pytest.approx(0.45)


def test_empty_sides_score_zero() -> None:
    assert av.best_matching_meteor([], ["x"], metric=table) == 0.0
    assert av.best_matching_meteor(["a"], [], metric=table) == 0.0
    assert av.best_matching_meteor([], []) == 0.0
    with pytest.raises(TypeError):
        av.best_matching_meteor("abc", ["x"], metric=table)  # type: ignore[arg-type]


# ---- real METEOR, values from nltk directly ---------------------------------------------


def _nltk(h: str, r: str) -> float:
    from nltk.translate.meteor_score import meteor_score

    return meteor_score([mt.tokenize(r)], mt.tokenize(h))


def test_best_matching_meteor_worked_example(wordnet_root: Path) -> None:
    gold = ["Where was the claim first published?", "Who is Sean Connery?"]
    pred = ["Who is Sean Connery?", "Where was it published?", "What is Apple?"]
    s = [[_nltk(p, g) for g in gold] for p in pred]
    # By hand: pred 0 is gold 1 verbatim, pred 1 is the nearest to gold 0; no other
    # one-to-one assignment of the 2 gold questions to 2 of the 3 predictions does better.
    best = s[1][0] + s[0][1]
    assert best == pytest.approx(max(s[i][0] + s[j][1] for i, j in permutations(range(3), 2)))
    assert s[0][1] == pytest.approx(1 - 0.5 / 5**3)  # 5 identical tokens, one chunk
    assert av.best_matching_meteor(pred, gold) == pytest.approx(best / 2)
    # Fewer predictions than gold: only "What is Apple?" -> its best gold over 2.
    assert av.best_matching_meteor(pred[2:], gold) == pytest.approx(max(s[2]) / 2)


# ---- gold strings, labels, cutoffs --------------------------------------------------------

GOLD = [
    {
        "claim": "c0",
        "label": "Refuted",
        "questions": [
            {"question": "Q1?", "answers": [{"answer": "A1", "answer_type": "Extractive"},
                                           {"answer": "A1b", "answer_type": "Abstractive"}]},
            {"question": "Q2?", "answers": [{"answer": "No", "answer_type": "Boolean",
                                            "boolean_explanation": "It was fake"}]},
            {"question": "Q3?", "answers": []},
            {"question": "Q4?", "answers": {"answer": "A4", "answer_type": "Extractive"}},
        ],
    },
    {"claim": "c1", "label": "Supported", "questions": [{"question": "Who?", "answers": [{"answer": "Me"}]}]},
]


def test_gold_comparison_strings_follow_the_official_scorer() -> None:
    assert av.gold_comparison_strings(GOLD[0]) == [
        "Q1? A1", "Q1? A1b", "Q2? No. It was fake", "Q3? No answer could be found.", "Q4? A4",
    ]  # fmt: skip


def test_empty_or_missing_answers_follow_eval_py(tmp_path: Path) -> None:
    # The shared task's rows: an empty, blank, null or missing answer is eval.py's
    # question without answers.
    row = {"claim_id": 0, "pred_label": "Refuted", "evidence": [
        {"question": "Q1?", "answer": "A1"}, {"question": "Q2?", "answer": ""}, {"question": "Q3?", "answer": "  "},
        {"question": "Q4?", "answer": None}, {"question": "Q5?"},
    ]}  # fmt: skip
    (p,) = av.load_predictions(_write(tmp_path, "p.json", [row]))
    assert p.questions == ("Q1?", "Q2?", "Q3?", "Q4?", "Q5?")
    assert p.qa_strings == ("Q1? A1",) + tuple(f"Q{i}? No answer could be found." for i in range(2, 6))
    assert p.qa_pairs[:2] == (("Q1?", "A1"), ("Q2?", ""))
    # eval.py's own rows are read as eval.py reads them: [] is "no answer", "" stays "Q? ".
    evalpy = {"label": "Supported", "justification": "J.", "questions": [
        {"question": "Q1?", "answers": [{"answer": "A"}, {"answer": "No", "answer_type": "Boolean",
                                                         "boolean_explanation": "E"}]},
        {"question": "Q2?", "answers": []}, {"question": "Q3?", "answers": [{"answer": ""}]},
    ], "string_evidence": ["S."]}  # fmt: skip
    (e,) = av.load_predictions(_write(tmp_path, "e.json", [evalpy]))
    assert e.questions == ("Q1?", "Q2?", "Q3?") and e.justification == "J." and e.label is Label.SUPPORT
    assert e.qa_strings == ("Q1? A", "Q1? No. E", "Q2? No answer could be found.", "Q3? ", "S.")
    # Without questions, the Q-only items are the strings (string_evidence), as in eval.py.
    (s,) = av.load_predictions(_write(tmp_path, "s.json", [{"label": "Refuted", "string_evidence": ["x", "y"]}]))
    assert s.questions == s.qa_strings == ("x", "y")
    assert av.predicted_justification(s) == "x y"


@pytest.mark.parametrize("row", [
    {"evidence": "not a list"}, {"evidence": ["not an object"]}, {"questions": [{"question": "q"}], "label": 1,
                                                                   "string_evidence": 5},
    {"questions": [{"question": "q", "answers": [{"no": "answer"}]}]}, "a string",
])  # fmt: skip
def test_unreadable_prediction_rows_are_clear_errors(tmp_path: Path, row: object) -> None:
    with pytest.raises(ValueError, match=r"p.json: prediction 0: not a submission row"):
        av.load_predictions(_write(tmp_path, "p.json", [row]))


def _write(tmp: Path, name: str, data: object) -> Path:
    path = tmp / name
    path.write_text(json.dumps(data))
    return path


def exact(h: str, r: str) -> float:
    return 1.0 if h == r else 0.0


def test_cutoff_is_strict_and_labels_are_normalised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mt, "meteor", exact)  # 1 for an identical string, else 0
    gold = av.load_gold(_write(tmp_path, "gold.json", GOLD))
    assert [g.claim_id for g in gold] == ["0", "1"] and gold[0].label is Label.REFUTE
    preds = [
        # 5 gold strings, 1 reproduced: Q+A = 1/5 = 0.2; questions: 1 of 4 -> 0.25.
        {"claim_id": 0, "pred_label": "REFUTED", "evidence": [{"question": "Q1?", "answer": "A1"}]},
        {"claim_id": 1, "pred_label": "Supported", "evidence": [{"question": "Who?", "answer": "Me"}]},
    ]
    scores = av.score_averitec(av.load_predictions(_write(tmp_path, "p.json", preds)), gold)
    c0, c1 = scores.per_claim
    assert (c0.q_only, c0.qa, c0.label_correct) == (0.25, 0.2, True)
    assert (c1.q_only, c1.qa, c1.label_correct) == (1.0, 1.0, True)
    assert scores.q_only == pytest.approx(0.625) and scores.qa == pytest.approx(0.6)
    assert scores.label_acc == 1.0
    # 0.2 is not > 0.2: claim 0 fails every cutoff, claim 1 passes them all.
    assert scores.averitec == {0.2: 0.5, 0.25: 0.5, 0.3: 0.5}
    assert scores.averitec_score == 0.5


def test_unknown_label_is_wrong_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mt, "meteor", exact)
    gold = av.load_gold(_write(tmp_path, "gold.json", GOLD))
    preds = [{"claim_id": 1, "pred_label": "Maybe", "evidence": [{"question": "Who?", "answer": "Me"}]},
             {"claim_id": 0, "pred_label": "Supported", "evidence": []}]
    scores = av.score_averitec(av.load_predictions(_write(tmp_path, "p.json", preds)), gold)
    assert scores.unknown_labels == 1 and scores.label_acc == 0.0
    assert [c.claim_id for c in scores.per_claim] == ["0", "1"]  # paired by claim_id
    assert scores.per_claim[1].qa == 1.0 and scores.averitec_score == 0.0
    assert scores.label_macro_f1 == 0.0


def test_pairing_errors_and_allow_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mt, "meteor", exact)
    gold = av.load_gold(_write(tmp_path, "gold.json", GOLD))
    one = av.load_predictions(_write(tmp_path, "p.json", [{"claim_id": 1, "pred_label": "Supported",
                                                           "evidence": [{"question": "Who?", "answer": "Me"}]}]))
    with pytest.raises(ValueError, match="1 gold claims have no prediction"):
        av.score_averitec(one, gold)
    scores = av.score_averitec(one, gold, allow_missing=True)
    assert scores.missing == 1 and scores.label_acc == 0.5 and scores.averitec_score == 0.5
    stray = av.load_predictions(_write(tmp_path, "s.json", [{"claim_id": 7, "pred_label": "Supported"}]))
    with pytest.raises(ValueError, match="gold does not have"):
        av.score_averitec(stray, gold)
    # Without claim_id, predictions pair by position.
    pos = av.load_predictions(_write(tmp_path, "pos.json", [{"pred_label": "Refuted"}, {"pred_label": "Supported"}]))
    assert av.score_averitec(pos, gold).label_acc == 1.0


def test_cli_prints_a_table_and_writes_json(tmp_path: Path, wordnet_root: Path) -> None:
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()
    gold = _write(tmp_path, "gold.json", GOLD)
    preds = _write(tmp_path, "p.json", [
        {"claim_id": 0, "claim": "c0", "pred_label": "Refuted", "evidence": [{"question": "Q1?", "answer": "A1"}]},
        {"claim_id": 1, "claim": "c1", "pred_label": "Refuted", "evidence": [{"question": "Who?", "answer": "Me"}]},
    ])  # fmt: skip
    out = tmp_path / "scores.json"
    r = CliRunner().invoke(app, ["score", "averitec", "--predictions", str(preds), "--gold", str(gold), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "AVeriTeC score @0.25 (main)" in r.output and "Q+A METEOR" in r.output
    data = json.loads(out.read_text())
    assert data["n"] == 2 and data["label_acc"] == 0.5 and data["main_cutoff"] == 0.25
    assert set(data["averitec_score_at"]) == {"0.2", "0.25", "0.3"}
    assert data["per_claim"][1]["qa"] == pytest.approx(1 - 0.5 / 3**3)  # "Who ? Me"
    bad = _write(tmp_path, "bad.json", {"not": "a list"})
    r = CliRunner().invoke(app, ["score", "averitec", "--predictions", str(bad), "--gold", str(gold)])
    assert r.exit_code == 1 and "expected a JSON list" in r.output


# ---- AVeriTeC dev against itself ---------------------------------------------------------

WRONG = {"Supported": "Refuted", "Refuted": "Supported", "Not Enough Evidence": "Supported",
         "Conflicting Evidence/Cherrypicking": "Refuted"}  # fmt: skip


def _submission(dev: list[dict], *, answers: bool, wrong: bool) -> list[dict]:
    rows = []
    for i, rec in enumerate(dev):
        if answers:  # the gold Q+A strings, split back into question and answer
            ev = [
                {"question": q["question"], "answer": text[len(q["question"]) + 1 :]}
                for q in rec["questions"]
                for text in av.gold_comparison_strings({"questions": [q]})
            ]
        else:
            ev = [{"question": q["question"], "answer": ""} for q in rec["questions"]]
        label = WRONG[rec["label"]] if wrong else rec["label"]
        rows.append({"claim_id": i, "claim": rec["claim"], "pred_label": label, "evidence": ev})
    return rows


@pytest.mark.data
def test_dev_scored_against_itself(shared_data: Path, wordnet_root: Path, tmp_path: Path) -> None:
    gold_path = shared_data / "averitec" / "dev.json"
    if not gold_path.is_file():
        pytest.skip(f"{gold_path} not found")
    dev = json.loads(gold_path.read_text())
    gold = av.load_gold(gold_path)

    def score(**kw: bool) -> av.AveritecScores:
        path = _write(tmp_path, "pred.json", _submission(dev, **kw))
        return av.score_averitec(av.load_predictions(path), gold)

    right = score(answers=True, wrong=False)
    assert right.n == 500 and right.label_acc == 1.0 and right.label_macro_f1 == 1.0
    assert right.averitec == {0.2: 1.0, 0.25: 1.0, 0.3: 1.0}
    for g, c in zip(gold, right.per_claim):
        # Each gold string matched to its own copy: METEOR 1 - 0.5/m^3 (a single chunk),
        # so just under 1; only the first 10 predicted items count.
        if len(g.qa_strings) <= av.MAX_QUESTIONS:
            assert c.qa > 0.99
        else:
            assert c.qa == pytest.approx(av.MAX_QUESTIONS / len(g.qa_strings), abs=0.01)
    assert right.qa > 0.99 and right.q_only > 0.99

    wrong = score(answers=True, wrong=True)
    assert wrong.label_acc == 0.0 and wrong.averitec == {0.2: 0.0, 0.25: 0.0, 0.3: 0.0}
    assert wrong.qa == pytest.approx(right.qa) and wrong.q_only == pytest.approx(right.q_only)

    questions = score(answers=False, wrong=False)
    # One predicted question per gold question (above: one per gold answer).
    assert questions.q_only > 0.99 and questions.label_acc == 1.0
    assert 0.25 < questions.qa < right.qa
    at = questions.averitec
    assert at[0.3] <= at[0.25] <= at[0.2] <= 1.0
    print(f"\ndev, gold questions without answers: Q+A {questions.qa:.4f}, AVeriTeC {at}")
