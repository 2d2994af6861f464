"""The before → after table of a run's held-out evaluations."""

from __future__ import annotations

import json

from factrl.train.learning import learning_table


def _write(run, name, **metrics):
    (run / name).mkdir(parents=True)
    base = {"n": 4, "majority_baseline": {"label": "REFUTE", "acc": 0.5}, "label_acc": 0.25, "mean_reward": 0.5}
    (run / name / "metrics.json").write_text(json.dumps({**base, **metrics}))


def test_table_adds_the_averitec_scores_when_both_evaluations_have_them(tmp_path):
    _write(tmp_path, "eval_before", averitec={"q_only_meteor": 0.19, "qa_meteor": 0.24, "averitec_score": 0.12})
    _write(tmp_path, "eval_after", label_acc=0.5,
           averitec={"q_only_meteor": 0.21, "qa_meteor": 0.2, "averitec_score": 0.2, "label_macro_f1": 0.3})
    table = learning_table(tmp_path)
    assert "| label_acc | 0.250 | 0.500 |" in table
    assert "| averitec.q_only_meteor | 0.190 | 0.210 |" in table
    assert "| averitec.averitec_score | 0.120 | 0.200 |" in table
    assert "| averitec.label_macro_f1 | n/a | 0.300 |" in table


def test_table_without_averitec_scores_has_no_such_rows(tmp_path):
    _write(tmp_path, "eval_before")
    _write(tmp_path, "eval_after", averitec={"q_only_meteor": 0.2})
    table = learning_table(tmp_path)
    assert "averitec." not in table and "Held-out claims: 4 (majority class REFUTE: 0.500)" in table


def test_a_run_that_holds_nothing_out_refuses_the_held_out_evaluation(tmp_path):
    import pytest

    from factrl.train.config import load_run_config
    from factrl.train.learning import evaluate_held_out

    from _support import REPO

    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml",
                          {"output_dir": str(tmp_path), "data.held_out_fraction": 0.0,
                           "data.data_dir": str(REPO / "tests" / "fixtures" / "tiny_claims.jsonl")})
    with pytest.raises(ValueError, match="holds no claims out"):
        evaluate_held_out(cfg, "no-such-model", tmp_path / "eval")
