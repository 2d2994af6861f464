"""Binary RAR's hallucination evaluation on scripted LMs: atomic claims extracted,
judged against evidence retrieved per claim, long-form 1 − precision, short-form wrong /
abstained, per-prompt detail; and ``factrl eval --agent rar`` writing it all."""

import json

import pytest

from factrl.datasets import load_dataset
from factrl.envs import build
from factrl.lm.scripted import ScriptedLM
from factrl.metrics.rar_eval import DETAIL_FILE, SUMMARY_FILE, rar_hallucination
from factrl.rewards import RewardDeps, build_reward
from factrl.rollout import RolloutConfig, run_episodes

from _support import REPO

FIXTURE = REPO / "tests" / "fixtures" / "rar_prompts.jsonl"
ANSWERS = {"p1": "The Nile flows north. The Nile is 9 km long.", "p2": "Paris is the capital of France.",
           "q1": "The Mediterranean Sea.", "q2": "I don't know.", "q3": "The Thames."}


class Oracle(ScriptedLM):
    """Plays every role from the prompt it gets: policy (fixed answers), verifier (JSON),
    claim extractor (sentences as a JSON list) and judge (word rules); records judge calls."""

    def __init__(self, bad_extraction_for=()):
        self.judged = []
        self.bad = bad_extraction_for
        super().__init__(self.answer)

    def answer(self, ctx):
        if "Facts (as a JSON list of strings):" in ctx:
            resp = ctx.split(">>> Begin of response <<<")[1].split("<<< End of response >>>")[0]
            if any(b in resp for b in self.bad):
                return "Sure, the facts are: the Nile."
            return "```json\n" + json.dumps([s.strip() + "." for s in resp.split(".") if s.strip()]) + "\n```"
        if "Your decision:" in ctx:
            claim = ctx.split("Claim: ")[1].split("\n")[0]
            shown = ctx.split(">>> Begin of search results <<<")[1].split("<<< End of search results >>>")[0]
            self.judged.append((claim, shown))
            if "9 km" in claim:
                return "Contradicted."
            return "supported" if "north" in claim or "capital" in claim else "inconclusive"
        if "professional fact-checker" in ctx:
            return '{"REASONING": "r", "SCORE": 0}' if ("9 km" in ctx or "Thames" in ctx) else '{"SCORE": 1}'
        for cid, text in (("p1", "Nile."), ("p2", "Paris."), ("q1", "Nile flow"), ("q2", "capital of France"),
                          ("q3", "Paris lie")):
            if text in ctx:
                return ANSWERS[cid]
        raise AssertionError(f"unexpected prompt: {ctx[:200]}")


def finished(lm):
    claims = load_dataset("rar_prompts", FIXTURE, "train").claims
    reward = build_reward("rar", RewardDeps(lms={"verifier": lm}))
    trajs = run_episodes(lambda: build("rar"), claims, lm, RolloutConfig(temperature=0), reward=reward)
    return trajs, reward


def test_long_and_short_form_rates_with_per_prompt_detail():
    lm = Oracle()
    trajs, reward = finished(lm)
    assert [t.reward.total for t in trajs] == [0.0, 1.0, 1.0, 1.0, 0.0]
    summary, per = rar_hallucination(trajs, lm, reward.evidence)
    lf, sf = summary["long_form"], summary["short_form"]
    # p1: "flows north" supported, "9 km long" contradicted → rate 0.5; p2: 1 supported → 0
    assert lf["n_responses"] == 2 and lf["hallucination_rate"] == pytest.approx(0.25)
    assert lf["precision"] == pytest.approx(0.75) and lf["contradiction_rate"] == pytest.approx(0.25)
    assert lf["hallucination_rate_micro"] == pytest.approx(1 / 3) and lf["mean_claims"] == 1.5
    # q1 correct, q2 abstained, q3 wrong
    assert (sf["correct"], sf["wrong"], sf["abstained"]) == (1, 1, 1)
    assert sf["hallucination_rate_attempted"] == 0.5 and sf["abstention_rate"] == pytest.approx(1 / 3)
    assert summary["reward_mean"] == pytest.approx(0.6) and summary["verifier_failures"] == 0
    p1 = per[0]
    assert p1["id"] == "p1" and p1["kind"] == "long" and p1["hallucination_rate"] == 0.5
    assert [(c["claim"], c["support"]) for c in p1["claims"]] == [("The Nile flows north.", "supported"),
                                                                  ("The Nile is 9 km long.", "contradicted")]
    assert per[3] == {"id": "q2", "kind": "short", "prompt": "What is the capital of France?",
                      "response": "I don't know.", "reward": trajs[3].reward.components, "error": None,
                      "abstained": True, "correct": False, "answers": ["Paris"]}
    # each claim is judged against chunks of its own prompt's documents, retrieved for it
    claim, shown = lm.judged[0]
    assert claim == "The Nile flows north." and "Nile" in shown


def test_extraction_failures_and_failed_episodes_are_counted_not_scored():
    lm = Oracle(bad_extraction_for=("Paris is the capital",))
    trajs, reward = finished(lm)
    trajs[0] = trajs[0].model_copy(update={"error": "generate failed: RuntimeError: boom"})
    summary, per = rar_hallucination(trajs, lm, reward.evidence)
    lf = summary["long_form"]
    assert lf["n_responses"] == 2 and lf["scored_responses"] == 0 and lf["extraction_failures"] == 2
    assert lf["hallucination_rate"] is None  # nothing scored: no rate, not 0
    assert per[0]["extraction_error"].startswith("episode failed") and "not a JSON list" in per[1]["extraction_error"]
    assert summary["episode_errors"] == 1


def test_cli_eval_agent_rar_writes_both_rates_and_per_prompt_detail(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import factrl.lm.loader as loader
    from factrl.cli import _load_commands, app

    _load_commands()
    lm = Oracle()
    loaded = []
    monkeypatch.setattr(loader, "load_lm", lambda model, **kw: loaded.append(model) or lm)
    r = CliRunner().invoke(app, ["eval", "--dataset", "rar_prompts", "--data-dir", str(FIXTURE), "--agent", "rar",
                                 "--model", "policy-model", "--verifier", "judge-model", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert loaded == ["policy-model", "judge-model"]
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["long_form"]["hallucination_rate"] == pytest.approx(0.25)
    assert summary["short_form"]["hallucination_rate_attempted"] == 0.5
    rows = [json.loads(x) for x in (tmp_path / DETAIL_FILE).read_text().splitlines()]
    assert [row["id"] for row in rows] == ["p1", "p2", "q1", "q2", "q3"]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["labelled"] is False and metrics["mean_reward"] == pytest.approx(0.6)
    assert json.loads((tmp_path / "run.json").read_text())["verifier"] == "judge-model"


class ChoiceOracle(Oracle):
    """Oracle that also scores Figure 12's answer words (for judge=choice): it favours the
    word its generated judgement would be; a claim with "boom" in it raises."""

    def score_choices(self, conversation, choices):
        ctx = conversation[-1].content
        if "boom" in ctx.split("Claim: ")[1]:
            raise RuntimeError("scoring failed")
        word = self.answer(ctx).strip(".").lower()
        return [-0.5 if c == word else -3.0 for c in choices]


def test_sentence_extraction_and_choice_judging_need_no_parsable_output():
    lm = ChoiceOracle(bad_extraction_for=("Nile", "Paris"))  # the LM extractor would fail on every response
    trajs, reward = finished(lm)
    summary, per = rar_hallucination(trajs, lm, reward.evidence, extract="sentences", judge_mode="choice")
    lf = summary["long_form"]
    assert summary["extraction"] == "sentences" and summary["judge"].startswith("choice")
    assert lf["extraction_failures"] == 0 and lf["unjudged_claims"] == 0
    # the same judgements as the generated path: p1 0.5, p2 0 → 0.25
    assert lf["hallucination_rate"] == pytest.approx(0.25)
    assert [(c["claim"], c["support"]) for c in per[0]["claims"]] == [("The Nile flows north.", "supported"),
                                                                      ("The Nile is 9 km long.", "contradicted")]
    with pytest.raises(ValueError, match="extract must be one of"):
        rar_hallucination(trajs, lm, reward.evidence, extract="words")
    with pytest.raises(ValueError, match="judge must be one of"):
        rar_hallucination(trajs, lm, reward.evidence, judge_mode="vote")


def test_metric_params_on_the_cli_are_recorded_and_checked(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import factrl.lm.loader as loader
    from factrl.cli import _load_commands, app

    _load_commands()
    lm = ChoiceOracle(bad_extraction_for=("Nile", "Paris"))
    monkeypatch.setattr(loader, "load_lm", lambda model, **kw: lm)
    base = ["eval", "--dataset", "rar_prompts", "--data-dir", str(FIXTURE), "--agent", "rar", "--model", "m"]
    r = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "ok")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "ok" / SUMMARY_FILE).read_text())["extraction"] == "lm (Figure 11)"
    # the finished run is re-scored with other metric parameters, no --force, no new episode
    r = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "ok"), "--metric-param", "extract=sentences",
                                 "--metric-param", "judge=choice"])
    assert r.exit_code == 0, r.output
    assert "5 of 5 claims already done" in r.output
    summary = json.loads((tmp_path / "ok" / SUMMARY_FILE).read_text())
    assert summary["extraction"] == "sentences" and summary["long_form"]["hallucination_rate"] == pytest.approx(0.25)
    assert json.loads((tmp_path / "ok" / "run.json").read_text())["metric_params"] == {"extract": "sentences",
                                                                                         "judge": "choice"}
    for bad, why in (("extractor=lm", "unknown rar metric parameter(s) extractor"),
                     ("judge_max_new_tokens=0", "must be a positive integer"),
                     ("judge=vote", "judge must be one of generate, choice")):
        r = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "bad"), "--metric-param", bad])
        assert r.exit_code == 2 and why in " ".join(r.output.replace("│", " ").split()), r.output
        assert not (tmp_path / "bad" / "trajectories.jsonl").exists()  # refused before any episode
    r = CliRunner().invoke(app, [*base, "--agent", "veri_r1", "--out", str(tmp_path / "v"),
                                 "--metric-param", "extract=sentences"])
    assert r.exit_code == 2 and "no metrics of its own" in " ".join(r.output.replace("│", " ").split())


def test_the_written_evaluation_uses_top_10_chunks_of_100_words(tmp_path):
    from factrl.metrics.rar_eval import write_rar_metrics

    lm = Oracle()
    trajs, reward = finished(lm)
    seen = []
    real = reward.with_evidence

    def spy(**kw):
        seen.append(kw)
        return real(**kw)

    object.__setattr__(reward, "with_evidence", spy)
    summary = write_rar_metrics(tmp_path, trajs, lms={"policy": lm}, reward=reward)
    assert seen == [{"k": 10, "chunk_tokens": 100}] and summary["evidence"] == {"k": 10, "chunk_words": 100}
    write_rar_metrics(tmp_path, trajs, lms={"policy": lm}, reward=reward,
                      params={"evidence_k": 4, "evidence_chunk_words": 50})
    assert seen[-1] == {"k": 4, "chunk_tokens": 50}
    with pytest.raises(ValueError, match="evidence_k must be a positive integer"):
        write_rar_metrics(tmp_path, trajs, lms={"policy": lm}, reward=reward, params={"evidence_k": 0})
