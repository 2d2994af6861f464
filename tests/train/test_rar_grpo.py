"""``factrl train grpo --agent rar``: GRPO with Binary RAR's reward on a tiny model, a
scripted verifier, and the KL to the reference in the loss (Theorem 1 needs it)."""

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from factrl.lm.scripted import ScriptedLM  # noqa: E402
from factrl.train.callbacks import read_metrics  # noqa: E402
from factrl.train.config import load_run_config  # noqa: E402
from factrl.train.grpo import train_grpo  # noqa: E402

from _support import REPO  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "rar_prompts.jsonl"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4)


def verifier_lm():
    """Finds a "contradiction" in responses whose code points sum to an odd number: a rule
    a random tiny model's outputs fall on both sides of, so advantages are not all 0."""

    def answer(ctx):
        response = ctx.split(">>> Begin of the response <<<")[1].split("<<< End of the response >>>")[0]
        score = 1 - sum(map(ord, response)) % 2
        return json.dumps({"REASONING": "scripted", "SCORE": score})

    return ScriptedLM(answer)


def run(tiny_model, out, monkeypatch, **grpo):
    import factrl.train.setup as setup

    asked = []
    monkeypatch.setattr(setup, "load_reward_lm", lambda model, base_url=None, on=None: asked.append(model) or verifier_lm())
    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml", {
        "model.id": str(tiny_model), "output_dir": str(out),
        "data.dataset": "rar_prompts", "data.data_dir": str(FIXTURE), "data.held_out_fraction": 0.2,
        "env.name": "rar", "reward.name": "rar", "rollout.batch_size": 8, "grpo.num_generations": 4,
        # the fixture's prompts have one or two documents; the tiny model never stops within
        # 12 tokens, and the non-stop penalty would give every response 0 (no signal)
        "reward.params": {"min_documents": 1, "nonstop_penalty": False},
        **{f"grpo.{k}": v for k, v in grpo.items()},
    })
    train_grpo(cfg)
    assert asked == [str(tiny_model)]  # no reward.verifier: the policy's model id, frozen
    return [r for r in read_metrics(out / "metrics.jsonl") if "loss" in r]


def test_kl_to_the_reference_is_in_the_loss(tiny_model, tmp_path, monkeypatch):
    beta = 0.5
    with_kl = run(tiny_model, tmp_path / "kl", monkeypatch, beta=beta, max_steps=2, seed=3)
    without = run(tiny_model, tmp_path / "nokl", monkeypatch, beta=0.0, max_steps=2, seed=3)
    assert [r["step"] for r in with_kl] == [1, 2]
    assert all(math.isfinite(r["loss"]) for r in with_kl + without)
    assert all("rewards/reward_no_contradiction/mean" in r and "rewards/verifier_failed/mean" in r for r in with_kl)
    # Step 1: policy = reference, KL 0 and both runs take the same update (the KL's
    # gradient is 0 there). Step 2: the same rollouts, a KL > 0 and the loss differs by
    # about β·KL.
    assert with_kl[0]["kl"] == pytest.approx(0.0, abs=1e-6)
    assert with_kl[0]["loss"] == pytest.approx(without[0]["loss"], abs=1e-6)
    kl = with_kl[1]["kl"]
    assert kl > 1e-6
    assert "kl" not in without[1] or without[1]["kl"] == 0.0
    diff = with_kl[1]["loss"] - without[1]["loss"]
    assert diff == pytest.approx(beta * kl, rel=0.1), (diff, beta * kl)
    # ... and the KL pulls the gradient too
    assert with_kl[0]["grad_norm"] == pytest.approx(without[0]["grad_norm"], rel=1e-5)
    assert with_kl[1]["grad_norm"] != pytest.approx(without[1]["grad_norm"], rel=1e-3)
    assert json.loads((tmp_path / "kl" / "config.json").read_text())["grpo"]["beta"] == beta


def test_training_drops_prompts_with_fewer_documents(tiny_model, tmp_path, monkeypatch):
    """App. C: prompts with fewer than three documents are discarded; with two allowed,
    only the fixture's two-document prompt trains."""
    import factrl.train.rollout_adapter as adapter
    import factrl.train.setup as setup

    trained = []
    real = adapter.EnvRollout.__init__

    def spy(self, claims, *a, **kw):
        trained.append(sorted(c.id for c in claims.values()))
        real(self, claims, *a, **kw)

    monkeypatch.setattr(adapter.EnvRollout, "__init__", spy)
    monkeypatch.setattr(setup, "load_reward_lm", lambda model, base_url=None, on=None: verifier_lm())
    base = {"model.id": str(tiny_model), "data.dataset": "rar_prompts", "data.data_dir": str(FIXTURE),
            "data.held_out_fraction": 0.0, "env.name": "rar", "reward.name": "rar", "rollout.batch_size": 8,
            "grpo.num_generations": 4, "grpo.max_steps": 1}
    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml",
                          {**base, "output_dir": str(tmp_path / "two"), "reward.params": {"min_documents": 2}})
    train_grpo(cfg)
    assert trained == [["p1"]]
    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml", {**base, "output_dir": str(tmp_path / "three")})
    with pytest.raises(ValueError, match="no training prompt has at least 3 documents"):
        train_grpo(cfg)


def test_binary_rar_presets_keep_the_kl_on():
    for name in ("binary_rar", "binary_rar_cpu"):
        cfg = load_run_config(name)
        assert cfg.grpo.beta > 0 and cfg.env.name == "rar" and cfg.reward.name == "rar"
    paper = load_run_config("binary_rar")
    assert paper.reward.params["k"] == 8 and paper.reward.params["chunk_tokens"] == 512
    assert paper.reward.params.get("mode", "generate") == "generate"
    # App. C: >= 3 documents per prompt, the non-stop penalty (App. A.5); App. B.1's
    # evaluation evidence (top-10 chunks of 100 words) is the metric's default
    assert paper.reward.params.get("min_documents", 3) == 3 and paper.reward.params.get("nonstop_penalty", True)
    assert not {"evidence_k", "evidence_chunk_words"} & set(paper.env.metric_params)
    assert (paper.grpo.prompts_per_update, paper.grpo.num_generations) == (16, 8)
    assert paper.model.id == "Qwen/Qwen3-8B" and paper.grpo.learning_rate == 1e-6 and paper.grpo.beta == 1e-3
    assert paper.reward.verifier == "openai:Qwen/Qwen3-32B" and not paper.preset.scaled_down
    cpu = load_run_config("binary_rar_cpu")
    assert cpu.preset.scaled_down and cpu.reward.params["mode"] == "choice" and cpu.reward.params["margin"] == 11.9
    assert "margin 11.9" in cpu.preset.notes
    assert cpu.env.metric_params == {"extract": "sentences", "judge": "choice"} and not paper.env.metric_params


def test_metric_params_are_checked_when_the_config_loads():
    with pytest.raises(ValueError, match="env.metric_params: judge must be one of"):
        load_run_config("binary_rar_cpu", {"env.metric_params": {"judge": "vote"}})
    with pytest.raises(ValueError, match="env.metric_params: agent 'veri_r1' has no metrics of its own"):
        load_run_config("veri_r1_online_cpu", {"env.metric_params": {"extract": "sentences"}})


def test_held_out_evaluation_writes_hallucination_rates_before_and_after(tmp_path, monkeypatch):
    """``train grpo --eval-held-out`` with the rar agent: the reward's (frozen) verifier
    also extracts and judges, and the learning table shows the rates."""
    import factrl.lm.loader as loader
    import factrl.train.setup as setup
    from factrl.train.learning import evaluate_held_out, learning_table

    def answer(ctx):
        if "Facts (as a JSON list of strings):" in ctx:
            return '["The Nile flows north.", "The Nile is 9 km long."]'
        if "Your decision:" in ctx:
            return "contradicted" if "9 km" in ctx.split("Claim: ")[1] else "supported"
        if "professional fact-checker" in ctx:
            return '{"REASONING": "r", "SCORE": 1}'
        return "I don't know." if "?" in ctx else "The Nile flows north. The Nile is 9 km long."

    judge, policy = ScriptedLM(answer), ScriptedLM(answer)
    loads = []  # (model, load_lm keywords)
    monkeypatch.setattr(setup, "load_reward_lm", lambda model, base_url=None, on=None: judge)
    monkeypatch.setattr(loader, "load_lm", lambda model, **kw: loads.append((model, kw)) or policy)
    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml", {
        "output_dir": str(tmp_path), "data.dataset": "rar_prompts", "data.data_dir": str(FIXTURE),
        "data.held_out_fraction": 0.6, "env.name": "rar", "reward.name": "rar", "model.dtype": "bfloat16",
        # responses are cut at 12 tokens: without the non-stop penalty the verifier decides
        "reward.params": {"nonstop_penalty": False}})
    for name in ("eval_before", "eval_after"):
        m = evaluate_held_out(cfg, "m", tmp_path / name)
        assert m["agent_metrics"]["n"] == 3 and m["mean_reward"] == 1.0
    # the policy evaluated where the run's model settings say (auto device: the CPU here)
    assert loads[0] == ("m", {"device": "cpu", "dtype": "bfloat16"})
    assert json.loads((tmp_path / "eval_before" / "run.json").read_text())["batch_size"] == 32
    summary = json.loads((tmp_path / "eval_after" / "hallucination.json").read_text())
    assert (summary["n_long"], summary["n_short"]) == (2, 1)  # held out: p1, p2, q1
    table = learning_table(tmp_path)
    assert "| mean_reward | 1.000 | 1.000 |" in table
    assert "| long_form.hallucination_rate | 0.500 | 0.500 |" in table
    assert "| short_form.abstention_rate | 1.000 | 1.000 |" in table
    assert summary["extraction"] == "lm (Figure 11)"
    # env.metric_params reach the held-out metrics: each sentence is a claim, no extraction call
    cfg.env.metric_params = {"extract": "sentences"}
    m = evaluate_held_out(cfg, "m", tmp_path / "eval_sentences")
    summary = json.loads((tmp_path / "eval_sentences" / "hallucination.json").read_text())
    rows = [json.loads(x) for x in (tmp_path / "eval_sentences" / "hallucination_per_prompt.jsonl").read_text().splitlines()]
    long_rows = [r for r in rows if r["kind"] == "long"]
    assert summary["extraction"] == "sentences" and len(long_rows) == 2
    assert all([c["claim"] for c in r["claims"]] == [r["response"]] for r in long_rows)  # one-sentence responses
