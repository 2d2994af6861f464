"""HARIS coordinated training (Algorithm 1) end to end on a tiny random model on CPU:
foundation (synthesis → searcher GRPO → reasoner GRPO with the new searcher frozen) and
one alternation round, interrupted after the foundation's searcher stage and resumed."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from factrl.envs import EnvDeps  # noqa: E402
from factrl.lm.scripted import ScriptedLM  # noqa: E402
from factrl.train import rollout_adapter  # noqa: E402
from factrl.train.config import load_run_config  # noqa: E402
from factrl.train.haris import STATE_FILE, segments, stage_names, synth_claims, train_haris  # noqa: E402
from factrl.train.haris_synthesis import (GOLD_ANSWERS, SynthesisStats, gold_hop_answer, pick_questions,  # noqa: E402
                                          write_pseudo_answers)
from factrl.types import Claim, EvidenceRef, Trajectory  # noqa: E402

from _support import REPO, WordOverlapRetriever  # noqa: E402
from envs.test_haris import PASSAGES  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4)


def test_stage_names_and_segments():
    assert stage_names(1) == ["foundation/synth", "foundation/searcher", "foundation/reasoner",
                              "round1/synth", "round1/searcher", "round1/reasoner"]
    claims = [Claim(id=str(i), text="x") for i in range(5)]
    assert sorted(len(s) for s in segments(claims, 2, seed=0)) == [2, 3]


def test_segments_mix_the_labels_of_a_label_grouped_split():
    # The held-out split lists the training claims label by label (REFUTE, then
    # SUPPORT); cut as they come, the last round would train on SUPPORT alone.
    claims = [Claim(id=f"r{i}", text="x", label="REFUTE") for i in range(360)]
    claims += [Claim(id=f"s{i}", text="x", label="SUPPORT") for i in range(360)]
    parts = segments(claims, 3, seed=0)
    assert [len(p) for p in parts] == [240, 240, 240]
    assert sorted(c.id for p in parts for c in p) == sorted(c.id for c in claims)
    for p in parts:
        assert sum(c.label.value == "SUPPORT" for c in p) == 120
    assert segments(claims, 3, seed=0) == parts and segments(claims, 3, seed=1) != parts
    # unequal label counts keep their shares in every segment (2,160 / 5,040 of 7,200)
    claims = [Claim(id=f"r{i}", text="x", label="REFUTE") for i in range(216)]
    claims += [Claim(id=f"s{i}", text="x", label="SUPPORT") for i in range(504)]
    assert [sum(c.label.value == "REFUTE" for c in p) for p in segments(claims, 3, seed=0)] == [72, 72, 72]


def test_question_picking_and_pseudo_gold_filtering():
    c1 = Claim(id="a", text="The Nile flows north.", label="SUPPORT", evidence=[EvidenceRef(id="n", text="It flows north.")])
    c2 = Claim(id="b", text="Paris is small.", label="NOT ENOUGH INFO")
    c3 = Claim(id="c", text="Paris is big.", label="REFUTE", evidence=[EvidenceRef(id="p", text="Paris is big.")])

    def t(c, qs):
        return Trajectory(claim_id=c.id, env="haris", claim=c, prompt=[], meta={"questions": qs})
    stats = SynthesisStats()
    pairs = pick_questions([t(c1, ["Q1?", "Q2?"]), t(c2, ["Q3?"]), t(c3, [])], first_only=True, fallback=True,
                           seed=0, stats=stats)
    assert [(c.id, q) for c, q in pairs] == [("a", "Q1?"), ("b", "Q3?"), ("c", "Is it true that Paris is big?")]
    assert stats.fallback == 1 and stats.with_question == 2
    asked = []
    answerer = ScriptedLM(lambda ctx: asked.append(ctx) or ("North" if "Nile" in ctx else "None"))
    out = write_pseudo_answers(pairs, answerer, stats)
    assert [(q.id, q.meta["pseudo_answer"]) for q in out] == [("a#q", "North")]
    assert stats.dropped_no_evidence == 1 and stats.dropped_none == 1
    assert "Veracity of the claim: true" in asked[0] and "It flows north." in asked[0]


def test_gold_pseudo_answers_come_from_the_datas_hop_questions():
    hops = [{"question": "Who founded Zirzusk?", "answers": [{"answer": "Skuskund Krukgux", "source_url": "z_4"}]},
            {"question": "Which company did Skuskund Krukgux work for?",
             "answers": [{"answer": "No answer could be found.", "source_url": ""}]}]
    c = Claim(id="w", text="The employer of the founder of Zirzusk was Kinvekmord.", label="NOT ENOUGH INFO",
              meta={"questions": hops})
    assert gold_hop_answer(c, "who FOUNDED zirzusk") == "Skuskund Krukgux"  # case and punctuation aside
    assert gold_hop_answer(c, "Which company did Skuskund Krukgux work for?") == ""  # unanswerable hop
    assert gold_hop_answer(c, "Where is Zirzusk?") is None and gold_hop_answer(c, "") is None
    stats = SynthesisStats()
    out = write_pseudo_answers([(c, "Who founded Zirzusk?"), (c, "Which company did Skuskund Krukgux work for?"),
                                (c, "Where is Zirzusk?")], GOLD_ANSWERS, stats)
    assert [(q.text, q.meta["pseudo_answer"], q.meta["claim_id"]) for q in out] == [
        ("Who founded Zirzusk?", "Skuskund Krukgux", "w")]
    assert (stats.kept, stats.dropped_none, stats.not_a_gold_hop) == (1, 1, 1)


def test_a_synthesis_stage_can_roll_out_on_a_label_interleaved_share_of_its_claims():
    claims = [Claim(id=f"{lab[0]}{i}", text="x", label=lab) for lab in ("SUPPORT", "REFUTE") for i in range(5)]
    assert synth_claims(claims, 0, seed=0) == claims  # the paper: all of them
    head = synth_claims(claims, 4, seed=0)
    assert len(head) == 4 and sorted(c.label.value for c in head) == ["REFUTE", "REFUTE", "SUPPORT", "SUPPORT"]
    assert synth_claims(claims, 50, seed=0) != claims and len(synth_claims(claims, 50, seed=0)) == 10
    with pytest.raises(ValueError, match="synth_limit"):
        synth_claims(claims, -1, seed=0)


def test_reasoner_stages_can_take_more_updates_than_search_agent_stages(tmp_path):
    from factrl.train.haris import _stage_config, _stage_steps

    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_haris.toml",
                          {"output_dir": str(tmp_path), "haris.steps_per_stage": 2})

    def steps() -> dict[str, int]:
        return {env: _stage_config(cfg, tmp_path, "m", env, {}, 40,
                                   _stage_steps(cfg.haris, reasoner=env == "haris")).grpo.max_steps
                for env in ("haris", "haris_searcher")}

    assert steps() == {"haris": 2, "haris_searcher": 2}
    cfg.haris.reasoner_steps_per_stage = 5
    assert steps() == {"haris": 5, "haris_searcher": 2}
    cfg.haris.steps_per_stage = 0  # the search agent falls back to an epoch of its questions
    assert steps() == {"haris": 5, "haris_searcher": -(-40 // cfg.grpo.prompts_per_update)}
    cfg.haris.reasoner_steps_per_stage = -1
    with pytest.raises(ValueError, match="reasoner_steps_per_stage must be >= 0"):
        train_haris(cfg)
    assert not (tmp_path / STATE_FILE).exists() and not (tmp_path / "config.json").exists()  # refused before writing


def test_the_synthesis_limit_reaches_the_stage(tiny_model, tmp_path):
    out = tmp_path / "haris"
    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_haris.toml",
                          {"model.id": str(tiny_model), "output_dir": str(out), "haris.synth_limit": 2,
                           "data.data_dir": str(REPO / "tests" / "fixtures" / "haris_tiny_claims.jsonl")})
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))
    train_haris(cfg, deps=deps, judge=ScriptedLM(lambda ctx: "yes"), answerer=ScriptedLM(lambda ctx: "North"),
                stop_after="foundation/synth")
    assert json.loads((out / "foundation/synth/synthesis.json").read_text())["rollouts"] == 2


def test_coordinated_round_with_resume(tiny_model, tmp_path, monkeypatch):
    out = tmp_path / "haris"
    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_haris.toml",
                          {"model.id": str(tiny_model), "output_dir": str(out),
                           "data.data_dir": str(REPO / "tests" / "fixtures" / "haris_tiny_claims.jsonl")})
    seen = []  # (lms roles, trajectories) of every GRPO rollout
    real = rollout_adapter.run_jobs

    def spy(jobs, lm, cfg_, **kw):
        trajs = real(jobs, lm, cfg_, **kw)
        seen.append((sorted(kw.get("lms") or {}), trajs))
        return trajs
    monkeypatch.setattr(rollout_adapter, "run_jobs", spy)
    judge = ScriptedLM(lambda ctx: "yes" if len(ctx) % 2 else "no")
    answerer = ScriptedLM(lambda ctx: "North")
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))

    state = train_haris(cfg, deps=deps, judge=judge, answerer=answerer, stop_after="foundation/searcher")
    assert state["done"] == ["foundation/synth", "foundation/searcher"]
    synth = json.loads((out / "foundation/synth/synthesis.json").read_text())
    assert synth["rollouts"] == 6 and synth["kept"] >= 1  # the tiny model asks nothing: fallback questions
    assert state["searcher"] == str(out / "foundation/searcher/final") and state["reasoner"] == str(tiny_model)
    # the searcher stage trained the search agent alone: its own episodes, no other role
    assert seen and all(roles == [] and all(t.env == "haris_searcher" and not t.segments for t in trajs)
                        for roles, trajs in seen)
    with pytest.raises(FileExistsError, match="--resume"):
        train_haris(cfg, deps=deps, judge=judge, answerer=answerer)

    seen.clear()
    state = train_haris(cfg, resume=True, deps=deps, judge=judge, answerer=answerer)
    assert state["done"] == stage_names(1)
    assert state["reasoner"] == str(out / "round1/reasoner/final")
    assert state["searcher"] == str(out / "round1/searcher/final")
    for stage in ("foundation/reasoner", "round1/searcher", "round1/reasoner"):
        assert (out / stage / "final" / "config.json").exists()
        assert (out / stage / "metrics.jsonl").exists()
    # reasoner stages ran with the searcher frozen as another role; the first trainer
    # rollout after resuming is the foundation reasoner's
    reasoner_rollouts = [(roles, trajs) for roles, trajs in seen if trajs[0].env == "haris"]
    assert reasoner_rollouts and all(roles == ["searcher"] for roles, _ in reasoner_rollouts)
    saved = json.loads((out / STATE_FILE).read_text())
    assert saved["done"] == stage_names(1)


def test_frozen_models_load_on_the_runs_device_and_dtype(monkeypatch):
    """The searcher, judge and answerer a stage calls (never trains) follow model.device
    and model.dtype; one behind an API gets its base_url only."""
    import factrl.lm.loader as loader
    from factrl.train import haris

    loads = []
    monkeypatch.setattr(loader, "load_lm", lambda model, **kw: loads.append((model, kw)))
    cfg = load_run_config("haris_cpu", {"model.device": "cpu", "model.dtype": "bf16"})
    haris._load("searcher-dir", cfg.model)
    haris._load("openai:judge", cfg.model, "http://127.0.0.1:1/v1")
    assert loads == [("searcher-dir", {"device": "cpu", "dtype": "bfloat16"}),
                     ("openai:judge", {"base_url": "http://127.0.0.1:1/v1"})]


def test_presets_hold_the_papers_settings():
    paper = load_run_config("haris")
    g, r = paper.grpo, paper.rollout
    assert (g.num_generations, g.learning_rate, g.beta, r.temperature) == (5, 1e-6, 0.001, 1.0)
    assert paper.env.name == "haris" and paper.env.params["top_k"] == 3 and "e5-small" in paper.preset.notes
    # App. A.2: multilingual-e5-small (with E5's prefixes); Algorithm 1 trains on all of T
    from importlib.resources import files

    from factrl.retrieval.encoders import declared_prefixes

    text = files("factrl.presets").joinpath("haris.toml").read_text()
    assert "--model intfloat/multilingual-e5-small" in text and "e5-small-v2" not in text
    assert declared_prefixes("intfloat/multilingual-e5-small").query == "query: "
    assert paper.data.held_out_fraction == 0.0
    assert "Algorithm 1" in paper.preset.paper and not paper.preset.scaled_down
    cpu = load_run_config("haris_cpu")
    assert cpu.preset.scaled_down and "Algorithm 1" in cpu.preset.paper and cpu.haris.rounds >= 1
    assert (cpu.grpo.num_generations, cpu.grpo.beta, cpu.rollout.temperature) == (5, 0.001, 1.0)


def test_cli_refuses_a_non_haris_config_and_a_bad_stage(tmp_path):
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()
    runner = CliRunner()
    bad = runner.invoke(app, ["train", "haris", "--config", "veri_r1_online_cpu", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "env.name must be 'haris'" in bad.output
    fixture = str(REPO / "tests" / "fixtures" / "tiny_haris.toml")
    bad = runner.invoke(app, ["train", "haris", "--config", fixture, "--out", str(tmp_path / "y"),
                              "--stop-after", "round9/synth",
                              "--set", f"data.data_dir={REPO / 'tests' / 'fixtures' / 'haris_tiny_claims.jsonl'}"])
    assert bad.exit_code == 1 and "unknown stage 'round9/synth'" in bad.output


def test_reasoner_stages_can_train_only_the_final_verification(tmp_path, monkeypatch):
    import factrl.train.grpo as grpo_mod
    import factrl.train.haris as haris_mod

    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_haris.toml",
                          {"output_dir": str(tmp_path), "haris.reasoner_trained_turns": "last"})
    seen = {}

    def fake_train(sub, **kwargs):
        seen["turns"] = sub.grpo.trained_turns
        return tmp_path / "final"

    monkeypatch.setattr(grpo_mod, "train_grpo", fake_train)
    monkeypatch.setattr(haris_mod, "_load", lambda *a, **k: None)
    monkeypatch.setattr(haris_mod, "env_factory", lambda *a, **k: None)
    monkeypatch.setattr(haris_mod, "build_reward", lambda *a, **k: None)
    run = haris_mod._Run(cfg, deps=None, judge=None, answerer=None)
    state = {"reasoner": "m", "searcher": "m"}
    run.reasoner("foundation/reasoner", state, [])
    assert seen["turns"] == "last" and cfg.grpo.trained_turns == "all"  # the run's own setting untouched
    cfg.haris.reasoner_trained_turns = ""
    run.reasoner("foundation/reasoner", state, [])
    assert seen["turns"] == "all"
