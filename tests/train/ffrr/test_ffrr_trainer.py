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
    assert (summary["device"], summary["dtype"]) == ("cpu", "float32")  # auto, on this machine
    # SciFact's CONFLICTING has no label word: counted, not silently trained on
    assert set(summary["skipped_labels"]) <= {"CONFLICTING"}


def test_query_side_training_against_the_frozen_index_vectors(setup):
    """doc_side = "index": candidates keep the index's vectors; evaluation searches that
    index with the trained encoder's queries (pool_depth 0)."""
    from factrl.datasets.prepare import prepare_splits
    from factrl.train.ffrr.evaluate import evaluate_retriever
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "ffrr_index", **{"ffrr.doc_side": "index", "eval.pool_depth": 0,
                                          "ffrr.learning_rate": 1e-3})
    final = train_ffrr(cfg)
    rows = [json.loads(line) for line in (Path(cfg.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["loss"] is not None for r in rows)
    _, held_out = prepare_splits(cfg.data, Path(cfg.output_dir))
    ev = evaluate_retriever(final, cfg, held_out)
    assert ev["pool_depth"] == 0 and 0 <= ev["dense"]["ndcg@10"] <= 1
    cfg.eval.label_limit = 2
    assert evaluate_retriever(final, cfg, held_out)["labels"]["n"] == 2
    enc = config(setup, "enc", **{"eval.pool_depth": 0})
    with pytest.raises(ValueError, match="eval.index"):
        evaluate_retriever(final, enc, held_out)


def test_hybrid_level_alternates_question_and_document_steps(setup, monkeypatch):
    """§4.3: each question-level step is followed by document-level steps on the same
    claims, querying with the questions that step sampled (not a random question)."""
    from factrl.train.ffrr import episodes
    from factrl.train.ffrr.trainer import train_ffrr

    asked, picked = [], []  # (step, claim, query) of document episodes; (step, claim, picks)
    step = {"n": 0}
    real_doc, real_q = episodes.doc_level, episodes.question_level

    def doc_spy(policy, cands, scores, claim, query, *a, **kw):
        asked.append((step["n"], claim, query))
        return real_doc(policy, cands, scores, claim, query, *a, **kw)

    def q_spy(policy, cands, scores, claim, questions, *a, **kw):
        out = real_q(policy, cands, scores, claim, questions, *a, **kw)
        picked.append((step["n"], claim, list(out.questions), list(questions)))
        return out

    monkeypatch.setattr(episodes, "doc_level", doc_spy)
    monkeypatch.setattr(episodes, "question_level", q_spy)
    from factrl.train.ffrr import trainer

    real_update = trainer._update

    def update_spy(*a, **kw):
        try:
            return real_update(*a, **kw)
        finally:
            step["n"] += 1

    monkeypatch.setattr(trainer, "_update", update_spy)
    cfg = config(setup, "ffrr_dq", **{"ffrr.level": "d+q", "ffrr.max_steps": 4, "ffrr.questions_k": 1,
                                       "ffrr.doc_steps_per_question_step": 2})
    # three questions per claim (the tiny LM cannot decompose: its cache is written here)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in (FIXTURE / "claims_train.jsonl").read_text().splitlines()]
    (out / "questions.jsonl").write_text("".join(
        json.dumps({"id": str(r["id"]), "questions": [f"{r['claim']} ({w})" for w in ("who", "what", "when")],
                    "fallback": False}) + "\n" for r in rows))
    train_ffrr(cfg)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["q", "d", "d", "q"]
    assert "question_reward" in rows[0] and "doc_reward" in rows[1]
    cached = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert cached and all(c["questions"] for c in cached)
    picks = {claim: p for s, claim, p, _ in picked if s == 0}
    assert picks and all(len(p) == 1 for p in picks.values())
    for d_step in (1, 2):
        # the same claims, each queried with exactly the question the q-step sampled
        seen = {(claim, query) for s, claim, query in asked if s == d_step}
        assert seen == {(claim, p[0]) for claim, p in picks.items()}
    # the picks are the sampled questions, which differ from the claim's other questions
    assert any(len(qs) > 1 for _, _, _, qs in picked)


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

    def flaky(cfg, **kw):
        scorer = real(cfg, **kw)
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
    # the same failure during precomputation is reported and the run goes on
    pre = config(setup, "flaky_pre", **{"ffrr.max_steps": 1, "ffrr.precompute": True})
    trainer.train_ffrr(pre)
    assert json.loads((Path(pre.output_dir) / "summary.json").read_text())["steps"] == 1


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
    args = ["train", "ffrr", "--config", "ffrr_cpu", "--out", str(out), "--device", "cpu", "--dtype", "bf16"]
    for s in sets:
        args += ["--set", s]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    # the LM scorer ran in bfloat16 (the encoder in float32), and the run says so
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["device"], summary["dtype"]) == ("cpu", "bfloat16")
    assert json.loads((out / "lm_scores.jsonl.meta.json").read_text())["dtype"] == "bfloat16"
    ev = json.loads((out / "eval.json").read_text())
    assert ev["n_claims"] >= 3 and 0 <= ev["dense"]["ndcg@10"] <= 1 and 0 <= ev["hybrid"]["recall@10"] <= 1
    # each query's own figures are kept (for a paired test between encoders); they average to the mean
    for side in ("dense", "hybrid"):
        each = ev["per_query"][side]["ndcg@10"]
        assert len(each) == ev[side]["n_queries"] and set(each) == set(ev["per_query"][side]["recall@10"])
        assert sum(each.values()) / len(each) == pytest.approx(ev[side]["ndcg@10"])
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

    assert list_ffrr_presets() == ["ffrr", "ffrr_cpu", "ffrr_cpu_likelihood"]
    paper = load_ffrr_config("ffrr")
    f = paper.ffrr
    assert (f.candidates, f.epsilon, f.top_k, f.tau, f.learning_rate, f.batch_size, f.warmup_ratio) == \
        (20, 0.1, 3, 1.0, 1e-5, 4, 0.1)
    assert f.level == "d+q" and f.baseline == "none" and not paper.preset.scaled_down
    # §6.1.2: a completion model read off the completions endpoint; §6.1.1: trained on the
    # train split, evaluated on the dataset's own test split
    assert paper.scorer.model == "openai:gpt-3.5-turbo-instruct" and paper.scorer.form == "completion"
    assert paper.data.held_out_fraction == 0.0 and paper.eval.split == "test"
    assert load_ffrr_config("ffrr_cpu").preset.scaled_down
    lik = load_ffrr_config("ffrr_cpu_likelihood")  # the validation-chosen departure
    assert lik.preset.scaled_down and lik.scorer.reward == "claim_likelihood"
    assert lik.ffrr.kl_coef == 0.2 and lik.ffrr.estimator == "exact"
    assert lik.ffrr.precompute and not lik.ffrr.final_reward and lik.data.limit is None
    with pytest.raises(ValueError, match="ffrr.method"):
        load_ffrr_config("ffrr_cpu", {"ffrr.method": "ppo"})
    with pytest.raises(ValueError, match="unknown setting"):
        load_ffrr_config("ffrr_cpu", {"ffrr.learning_rat": 1.0})


def test_precompute_fills_a_persistent_cache_that_the_next_run_reuses(setup):
    """Every (claim, candidate) row is scored once before the first update and written to
    scorer.cache; a second run with the same scorer scores nothing already there."""
    from factrl.train.ffrr.trainer import train_ffrr

    root, _ = setup
    cache = root / "shared_scores.jsonl"
    first = config(setup, "pre1", **{"ffrr.precompute": True, "scorer.cache": str(cache), "ffrr.final_reward": False})
    train_ffrr(first)
    rows = [json.loads(line) for line in cache.read_text().splitlines()]
    train_ids = (Path(first.output_dir) / "train_ids.txt").read_text().split()
    singles = [r for r in rows if len(r["docs"]) == 1]
    # the fixture's usable training claims × 4 candidates, each scored exactly once
    assert len({(r["claim"], r["docs"][0]) for r in singles}) == len(singles) >= 4
    assert len(singles) % 4 == 0 and len(singles) // 4 <= len(train_ids)
    assert all(abs(sum(r["probs"]) - 1) < 1e-6 for r in rows)
    first_lm_rows = json.loads((Path(first.output_dir) / "summary.json").read_text())["lm_rows"]
    assert first_lm_rows == len(rows)
    # same scorer, another method: nothing is scored again
    second = config(setup, "pre2", **{"ffrr.precompute": True, "scorer.cache": str(cache),
                                      "ffrr.final_reward": False, "ffrr.method": "replug"})
    train_ffrr(second)
    assert json.loads((Path(second.output_dir) / "summary.json").read_text())["lm_rows"] == 0
    assert len(cache.read_text().splitlines()) == len(rows)


def test_score_cache_refuses_another_scorer_and_skips_a_torn_line(setup, tmp_path):
    from factrl.train.ffrr.episodes import ScoreCache
    from factrl.train.ffrr.trainer import load_scorer, scorer_fingerprint
    from factrl.types import Passage

    cfg = config(setup, "cache_check")
    scorer = load_scorer(cfg)
    path = tmp_path / "scores.jsonl"
    doc = Passage(id="d1", doc_id="d1", text="Aspirin lowers fever in adults.")
    cache = ScoreCache(scorer, path, scorer_fingerprint(cfg))
    row = cache.one("Aspirin reduces fever.", [doc])
    assert cache.lm_rows == 1
    with path.open("a") as fh:
        fh.write('{"claim": "cut off mid-wri')  # a crash while appending
    again = ScoreCache(scorer, path, scorer_fingerprint(cfg))
    assert again.torn == 1 and len(again) == 1
    assert again.one("Aspirin reduces fever.", [doc]) == row and again.lm_rows == 0
    other = scorer_fingerprint(cfg) | {"max_doc_chars": 999}
    with pytest.raises(ValueError, match="another scorer"):
        ScoreCache(scorer, path, other)
    # float32 rows (every earlier cache's) are not bfloat16 rows
    assert scorer_fingerprint(cfg, "float32") == scorer_fingerprint(cfg)
    with pytest.raises(ValueError, match="another scorer"):
        ScoreCache(scorer, path, scorer_fingerprint(cfg, "bfloat16"))


def test_train_labels_keeps_only_those_claims(setup):
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "only_support", **{"ffrr.train_labels": ["SUPPORT"]})
    train_ffrr(cfg)
    summary = json.loads((Path(cfg.output_dir) / "summary.json").read_text())
    assert summary["train_claims"] >= 1
    assert "SUPPORT" not in summary["skipped_labels"] and set(summary["skipped_labels"]) & {"REFUTE", "NOT ENOUGH INFO"}
    with pytest.raises(ValueError, match="train_labels"):
        train_ffrr(config(setup, "bad_labels", **{"ffrr.train_labels": ["MAYBE"]}))


def test_claim_likelihood_reward_samples_without_the_stopping_rule(setup):
    """scorer.reward = "claim_likelihood": one-value rows (negative log-likelihoods), no
    stopping rule (max_samples documents each), its own cache fingerprint."""
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "likelihood", **{"scorer.reward": "claim_likelihood", "ffrr.final_reward": False,
                                         "ffrr.precompute": True})
    train_ffrr(cfg)
    out = Path(cfg.output_dir)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(r["kappa"] == 3 and r["stopped"] == 0 and r["doc_reward"] < 0 for r in rows)
    cached = [json.loads(line) for line in (out / "lm_scores.jsonl").read_text().splitlines()]
    assert cached and all(len(r["probs"]) == 1 for r in cached)
    assert json.loads((out / "lm_scores.jsonl.meta.json").read_text())["reward"] == "claim_likelihood"
    with pytest.raises(ValueError, match="scorer.reward"):
        config(setup, "bad_reward", **{"scorer.reward": "vibes"})


def test_kl_to_the_frozen_retriever_starts_at_zero_and_grows(setup):
    """ffrr.kl_coef: KL(π_θ ‖ π_0) over D′, π_0 from the frozen index's own scores; the
    untrained policy is π_0, so the first update sees KL 0; after updates it is > 0."""
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "kl", **{"ffrr.doc_side": "index", "eval.pool_depth": 0, "ffrr.kl_coef": 1.0,
                                  "ffrr.learning_rate": 1e-2, "ffrr.max_steps": 3})
    train_ffrr(cfg)
    rows = [json.loads(line) for line in (Path(cfg.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert abs(rows[0]["kl"]) < 1e-4 and rows[-1]["kl"] > 1e-4
    with pytest.raises(ValueError, match="kl_coef"):
        config(setup, "bad_kl", **{"ffrr.kl_coef": -1})


def test_exact_estimator_scores_every_candidate_and_needs_no_sampling(setup):
    """ffrr.estimator = "exact": each claim's whole D′ scored one document at a time,
    loss = −E_π[R] (+ KL); the reward's spread over D′ and the KL are logged; settings
    that need an episode (final reward, question level) are refused."""
    from factrl.train.ffrr.trainer import train_ffrr

    cfg = config(setup, "exact", **{"scorer.reward": "claim_likelihood", "ffrr.final_reward": False,
                                     "ffrr.estimator": "exact", "ffrr.kl_coef": 0.5, "ffrr.doc_side": "index",
                                     "eval.pool_depth": 0, "ffrr.learning_rate": 1e-2, "ffrr.max_steps": 3})
    train_ffrr(cfg)
    out = Path(cfg.output_dir)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["kind"] == "d" and r["loss"] is not None for r in rows)
    assert all(r["doc_reward"] < 0 and r["reward_spread"] > 0 and "kappa" not in r for r in rows)
    assert abs(rows[0]["kl"]) < 1e-4 and rows[-1]["kl"] > 1e-4
    cached = [json.loads(line) for line in (out / "lm_scores.jsonl").read_text().splitlines()]
    assert len({(r["claim"], tuple(r["docs"])) for r in cached}) == len(cached)
    assert all(len(r["docs"]) == 1 for r in cached)
    with pytest.raises(ValueError, match="final_reward"):
        config(setup, "bad_exact", **{"ffrr.estimator": "exact"})
    with pytest.raises(ValueError, match="level"):
        config(setup, "bad_exact_q", **{"ffrr.estimator": "exact", "ffrr.final_reward": False, "ffrr.level": "q"})
    with pytest.raises(ValueError, match="estimator"):
        config(setup, "bad_estimator", **{"ffrr.estimator": "guess"})


def test_evaluation_on_the_datasets_own_split(tmp_path):
    """eval.split evaluates a split of the dataset (the paper's test split); without it,
    the held-out part of the training split."""
    import shutil

    from factrl.train.ffrr.config import load_ffrr_config
    from factrl.train.ffrr.evaluate import evaluation_claims

    data = tmp_path / "scifact"
    shutil.copytree(FIXTURE, data)
    rows = (FIXTURE / "claims_train.jsonl").read_text().splitlines()
    (data / "claims_dev.jsonl").write_text("\n".join(rows[:3]) + "\n")
    base = {"data.dataset": "scifact", "data.data_dir": str(data), "data.held_out_fraction": 0.0,
            "output_dir": str(tmp_path / "run")}
    name, claims = evaluation_claims(load_ffrr_config("ffrr_cpu", {**base, "eval.split": "dev"}))
    assert name == "dev" and [c.id for c in claims] == [str(json.loads(r)["id"]) for r in rows[:3]]
    name, claims = evaluation_claims(load_ffrr_config("ffrr_cpu", {**base, "data.held_out_fraction": 0.3}))
    assert name == "held_out" and claims
    with pytest.raises(ValueError, match="training split"):
        evaluation_claims(load_ffrr_config("ffrr_cpu", {**base, "eval.split": "train"}))
    with pytest.raises(FileNotFoundError, match="claims_test.jsonl"):
        evaluation_claims(load_ffrr_config("ffrr_cpu", {**base, "eval.split": "test"}))
    with pytest.raises(ValueError, match="folder"):
        evaluation_claims(load_ffrr_config("ffrr_cpu", {**base, "eval.split": "dev",
                                                        "data.data_dir": str(data / "claims_dev.jsonl")}))
