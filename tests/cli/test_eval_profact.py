"""``factrl eval --agent profact --dataset averitec`` end to end with a tiny random model
over an index of the pooled gold answers: trajectories, the submission file and its
scores, per-stage failure counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("nltk")
pytest.importorskip("scipy")

DATA = Path(__file__).parents[1] / "fixtures" / "datasets" / "averitec"


# METEOR prepares its offline WordNet on first use (factrl.metrics.meteor.ensure_wordnet).


@pytest.fixture(scope="module")
def cli():
    from factrl.cli import _load_commands, app

    _load_commands()
    runner = CliRunner()
    return lambda args: runner.invoke(app, args)


@pytest.fixture(scope="module")
def index(cli, tmp_path_factory) -> Path:
    """An index over the fixture's pooled gold answers (the evidence store)."""
    tmp = tmp_path_factory.mktemp("averitec")
    r = cli(["corpus", "pool", "--dataset", "averitec", "--data-dir", str(DATA), "--split", "dev",
             "--out", str(tmp / "corpus.jsonl")])
    assert r.exit_code == 0, r.output
    r = cli(["index", "build", "--corpus", str(tmp / "corpus.jsonl"), "--out", str(tmp / "index")])
    assert r.exit_code == 0, r.output
    return tmp / "index"


def test_factrl_eval_profact_on_averitec(cli, index: Path, tmp_path: Path):
    from factrl.lm.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    out = tmp_path / "run"
    r = cli(["eval", "--agent", "profact", "--dataset", "averitec", "--data-dir", str(DATA),
             "--split", "dev", "--index", str(index), "--model", str(model),
             "--max-new-tokens", "8", "--batch-size", "4", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "averitec_predictions.json" in r.output
    trajs = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == 4 and all(t["env"] == "profact" and t["error"] is None for t in trajs)
    assert json.loads((out / "run.json").read_text())["reward"]["name"] == "profact"
    rows = json.loads((out / "averitec_predictions.json").read_text())
    assert [r["claim_id"] for r in rows] == ["0", "1", "2", "3"]
    metrics = json.loads((out / "metrics.json").read_text())
    av = metrics["averitec"]
    assert av["n"] == 4 and {"q_only_meteor", "qa_meteor", "label_acc", "averitec_score"} <= set(av)
    # A random model writes no <questions> block: every question stage fails, counted.
    assert metrics["stage_failures"]["question"] == 4
    assert all(t["reward"]["total"] == t["reward"]["components"]["label"] for t in trajs)


def test_factrl_train_teach_profact_writes_scored_protocol_perfect_episodes(cli, index: Path, tmp_path: Path):
    out = tmp_path / "teach"
    r = cli(["train", "teach", "--agent", "profact", "--param", "max_questions=2", "--dataset", "averitec",
             "--data-dir", str(DATA), "--split", "dev", "--index", str(index), "--out", str(out)])
    assert r.exit_code == 0, r.output
    trajs = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == 4 and all(t["verdict"]["format_ok"] for t in trajs)
    assert all(len(t["meta"]["questions"]) <= 2 and len(t["segments"]) == len(t["meta"]["questions"]) for t in trajs)
    assert json.loads((out / "run.json").read_text())["model"] == "profact-teacher"
    av = json.loads((out / "metrics.json").read_text())["averitec"]
    assert av["label_acc"] == 1.0 and av["q_only_meteor"] > 0.5
    # An agent without a teacher is a usage error that names the ones with one.
    r = cli(["train", "teach", "--agent", "decompose", "--dataset", "averitec", "--data-dir", str(DATA),
             "--split", "dev", "--index", str(index), "--out", str(tmp_path / "bad")])
    assert r.exit_code == 2 and "profact" in r.output
    # A teacher that cannot play the claims' labels (HARIS: Support / Refute only) says so up front.
    r = cli(["train", "teach", "--agent", "haris", "--dataset", "averitec", "--data-dir", str(DATA),
             "--split", "dev", "--index", str(index), "--out", str(tmp_path / "bad-haris")])
    assert r.exit_code == 2 and "no such reading" in r.output
