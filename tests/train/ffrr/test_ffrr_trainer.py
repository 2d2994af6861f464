"""``factrl train ffrr`` end to end on a mini SciFact, a tiny LM scorer and MiniLM."""

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

FIXTURE = Path(__file__).parents[2] / "fixtures" / "datasets" / "scifact_mini"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import torch

    from factrl.lm.tiny import build_tiny_model
    from factrl.retrieval.index import build_index

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("ffrr")
    lm = build_tiny_model(root / "tiny", layers=1, hidden=32, heads=2, seed=0)
    build_index(FIXTURE / "corpus.jsonl", root / "index", corpus_format="scifact", retriever="hybrid",
                unit_sentences=0, progress=False, max_seq_length=64)
    return root, lm


def config(setup, name, **sets):
    from factrl.train.ffrr.config import load_ffrr_config

    root, lm = setup
    base = {"data.dataset": "scifact", "data.data_dir": str(FIXTURE), "data.held_out_fraction": 0.3,
            "retriever.index": str(root / "index"), "retriever.max_seq_length": 64,
            "scorer.model": str(lm), "scorer.max_doc_chars": 200, "ffrr.candidates": 4, "ffrr.top_k": 2,
            "ffrr.max_samples": 3, "ffrr.max_steps": 2, "ffrr.batch_size": 2, "eval.pool_depth": 4,
            "ffrr.doc_side": "encode",
            "output_dir": str(root / name)}
    return load_ffrr_config("ffrr_cpu", {**base, **sets})


def test_ffrr_document_level_trains_logs_and_saves(setup):
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "ffrr_d")
    final = train_ffrr(cfg)
    out = Path(cfg.output_dir)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["kind"] == "d" for r in rows)
    assert all(r["claims"] == 2 and r["loss"] is not None and 1 <= r["kappa"] <= 3 for r in rows)
    assert all(0 < r["doc_reward"] < 1 and 0 < r["final_reward"] < 1 for r in rows)
    assert rows[0]["lr"] < rows[1]["lr"] or rows[1]["lr"] < rows[0]["lr"]  # warm-up then decay
    assert (final / "modules.json").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["failures"] == {} and summary["lm_rows"] > 0
    # SciFact's CONFLICTING has no label word: counted, not silently trained on
    assert set(summary["skipped_labels"]) <= {"CONFLICTING"}


def test_query_side_training_against_the_frozen_index_vectors(setup):
    """doc_side = "index": candidates keep the index's vectors; evaluation searches that
    index with the trained encoder's queries (pool_depth 0)."""
    from factrl.datasets.prepare import prepare_splits
    from factrl.train.ffrr.evaluate import evaluate_held_out
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "ffrr_index", **{"ffrr.doc_side": "index", "eval.pool_depth": 0,
                                          "ffrr.learning_rate": 1e-3})
    final = train_ffrr(cfg)
    rows = [json.loads(line) for line in (Path(cfg.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["loss"] is not None for r in rows)
    _, held_out = prepare_splits(cfg.data, Path(cfg.output_dir))
    ev = evaluate_held_out(final, cfg, held_out)
    assert ev["pool_depth"] == 0 and 0 <= ev["dense"]["ndcg@10"] <= 1
    cfg.eval.label_limit = 2
    assert evaluate_held_out(final, cfg, held_out)["labels"]["n"] == 2
    enc = config(setup, "enc", **{"eval.pool_depth": 0})
    with pytest.raises(ValueError, match="eval.index"):
        evaluate_held_out(final, enc, held_out)


def test_hybrid_level_alternates_question_and_document_steps(setup):
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "ffrr_dq", **{"ffrr.level": "d+q", "ffrr.max_steps": 3,
                                       "ffrr.doc_steps_per_question_step": 2})
    train_ffrr(cfg)
    out = Path(cfg.output_dir)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["q", "d", "d"]
    assert "question_reward" in rows[0] and "doc_reward" in rows[1]
    cached = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert cached and all(c["questions"] for c in cached)


def test_replug_and_frozen_comparison_trainers(setup):
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "replug", **{"ffrr.method": "replug", "ffrr.max_steps": 1, "ffrr.replug_docs": 3})
    train_ffrr(cfg)
    (row,) = [json.loads(line) for line in (Path(cfg.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert row["kind"] == "replug" and row["loss"] >= 0
    cfg = config(setup, "frozen", **{"ffrr.method": "frozen"})
    final = train_ffrr(cfg)
    assert (final / "modules.json").is_file() and not (Path(cfg.output_dir) / "metrics.jsonl").exists()


def test_a_failing_scorer_is_counted_not_crashed(setup, monkeypatch):
    from factrl.lm.remote import LMRequestError
    from factrl.train.ffrr import trainer

    real = trainer.load_scorer

    def flaky(cfg):
        scorer = real(cfg)
        calls = {"n": 0}
        inner = scorer.probs

        def probs(items):
            calls["n"] += 1
            if calls["n"] == 1:
                raise LMRequestError("chat completion failed after 3 tries: 503")
            return inner(items)

        scorer.probs = probs
        return scorer

    monkeypatch.setattr(trainer, "load_scorer", flaky)
    cfg = config(setup, "flaky", **{"ffrr.max_steps": 1})
    trainer.train_ffrr(cfg)
    summary = json.loads((Path(cfg.output_dir) / "summary.json").read_text())
    assert summary["failures"] == {"LMRequestError": 1}


def test_cli_trains_evaluates_and_the_model_reindexes(setup):
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app
    from factrl.retrieval.index import load_index

    _load_commands()
    root, lm = setup
    out = root / "cli"
    sets = ["data.dataset=scifact", f"data.data_dir={FIXTURE}", "data.held_out_fraction=0.3",
            f"retriever.index={root / 'index'}", "retriever.max_seq_length=64", f"scorer.model={lm}",
            "scorer.max_doc_chars=200", "ffrr.candidates=4", "ffrr.top_k=2", "ffrr.max_samples=3",
            "ffrr.max_steps=1", "ffrr.batch_size=2", "eval.pool_depth=4", "ffrr.doc_side=encode"]
    args = ["train", "ffrr", "--config", "ffrr_cpu", "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    ev = json.loads((out / "eval.json").read_text())
    assert ev["n_claims"] >= 3 and 0 <= ev["dense"]["ndcg@10"] <= 1 and 0 <= ev["hybrid"]["recall@10"] <= 1
    assert ev["labels"]["n"] >= 1 and ev["labels"]["macro_f1"] is not None
    res = CliRunner().invoke(app, ["index", "build", "--corpus", str(FIXTURE / "corpus.jsonl"), "--corpus-format",
                                   "scifact", "--retriever", "dense", "--unit-sentences", "0", "--model",
                                   str(out / "final"), "--out", str(root / "reindexed"), "--no-progress"])
    assert res.exit_code == 0, res.output
    idx = load_index(root / "reindexed")
    assert idx.manifest.params["model"] == str(out / "final")
    (hits,) = idx.search(["Smoking raises the risk of lung cancer."], 1)
    assert hits[0].passage.doc_id == "3"


def test_presets_load_and_bad_settings_are_refused():
    from factrl.train.ffrr.config import list_ffrr_presets, load_ffrr_config

    assert list_ffrr_presets() == ["ffrr", "ffrr_cpu"]
    paper = load_ffrr_config("ffrr")
    f = paper.ffrr
    assert (f.candidates, f.epsilon, f.top_k, f.tau, f.learning_rate, f.batch_size, f.warmup_ratio) == \
        (20, 0.1, 3, 1.0, 1e-5, 4, 0.1)
    assert f.level == "d+q" and f.baseline == "none" and not paper.preset.scaled_down
    assert load_ffrr_config("ffrr_cpu").preset.scaled_down
    with pytest.raises(ValueError, match="ffrr.method"):
        load_ffrr_config("ffrr_cpu", {"ffrr.method": "ppo"})
    with pytest.raises(ValueError, match="unknown setting"):
        load_ffrr_config("ffrr_cpu", {"ffrr.learning_rat": 1.0})
