"""Binary RAR's long-form hallucination rate under the ``released`` convention against
the authors' released evaluation (``fact_eval`` at d97ea69).

``fixtures/released/fe_released.json`` is a hand-made set of five responses with what an
extraction LM and a judge answered, and what the released code makes of it: the claims
it reads, the sha256 of every extraction and judge prompt (evidence included), the
per-response scores and the rate — computed once outside the project."""

import hashlib
import json
from pathlib import Path

import pytest

from factrl.envs import EnvSpec, build
from factrl.lm.scripted import ScriptedLM
from factrl.metrics.rar_eval import write_rar_metrics
from factrl.metrics.rar_eval_released import final_answer, is_sole_abstention, parse_claims_released
from factrl.rewards import build_reward
from factrl.rewards.rar_released import NO_THINKING
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "released" / "fe_released.json").read_text())


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Judge(ScriptedLM):
    """Answers extraction prompts with the item's recorded extraction and judge prompts
    with the recorded reply for the claim; keeps every prompt (the user message)."""

    def __init__(self):
        self.extract, self.judge = [], []
        by_response = {it["response"]: it["extraction"] for it in FIXTURE["items"]}

        def respond(ctx):
            user = ctx.split("<user>", 1)[1].rsplit("</user>", 1)[0]
            assert ctx.endswith("<assistant>" + NO_THINKING)
            if user.startswith("Extract as many"):
                self.extract.append(user)
                response = user.split(">>> Begin of response <<<\n", 1)[1].split("\n<<< End of response")[0]
                return by_response[response]
            self.judge.append(user)
            return FIXTURE["judge"][user.split("\nClaim: ", 1)[1].split("Task: ", 1)[0].strip()]

        super().__init__(respond)


def trajectories(ids=False):
    items = FIXTURE["items"]
    claims = [Claim(id=it["id"], text=it["prompt"], meta={"kind": "long", "documents": [
        {**d, "id": f"{it['id']}-{j}"} if ids else d for j, d in enumerate(it["documents"])]}) for it in items]
    texts = iter(it["response"] for it in items)
    return run_episodes(lambda: build("rar"), claims, ScriptedLM(lambda ctx: next(texts)),
                        RolloutConfig(temperature=0, batch_size=8), score=False)


def test_the_long_form_rate_equals_the_released_evaluations(tmp_path):
    judge = Judge()
    trajs = trajectories()
    reward = build_reward("rar")
    summary = write_rar_metrics(tmp_path, trajs, lms={"policy": judge}, reward=reward,
                                params={"convention": "released", "judge_max_new_tokens": 32})
    lf = summary["long_form"]
    assert lf["hallucination_rate"] == pytest.approx(FIXTURE["hallucination_rate"])
    for key in ("factuality_score", "abstain_ratio", "num_claims", "num_correct_claims"):
        assert lf[key] == pytest.approx(FIXTURE["aggregate"][key]), key
    rows = [json.loads(line) for line in (tmp_path / "hallucination_per_prompt.jsonl").read_text().splitlines()]
    assert [r["factuality_score"] for r in rows] == [p["factuality_score"] for p in FIXTURE["per_response"]]
    assert [[c["claim"] for c in r["claims"]] for r in rows] == FIXTURE["claims"]
    # the extraction prompts, and one judge prompt per distinct claim with its evidence
    assert [sha(p) for p in judge.extract] == [FIXTURE["extraction_prompt_sha256"][it["id"]] for it in FIXTURE["items"]]
    seen = {p.split("\nClaim: ", 1)[1].split("\nTask: ", 1)[0]: sha(p) for p in judge.judge}
    assert len(judge.judge) == len(seen) == lf["distinct_claims"] == len(FIXTURE["judge_prompt_sha256"])
    assert seen == FIXTURE["judge_prompt_sha256"]
    # exact "supported" only: "Supported", "supported.", " supported" and prose are not
    assert lf["judge_replies"] == {"contradicted": 1, "inconclusive": 1, "other": 4, "supported": 3}


def test_the_paper_convention_reads_the_same_outputs_otherwise(tmp_path):
    """The paper's parsers on the same replies: the fenced list after prose and the JSON
    object are extraction failures (left out), "Supported", "supported." and " supported"
    are supported, "The claim is supported" is unjudged (left out): rate 0.0 against the
    released 0.542."""
    class NoPrefix(Judge):
        def __init__(self):
            super().__init__()
            inner = self.respond
            self.respond = lambda ctx: inner(ctx + NO_THINKING)  # the paper's calls think freely

    # (the paper's evidence pools need document ids)
    summary = write_rar_metrics(tmp_path, trajectories(ids=True), lms={"policy": NoPrefix()}, reward=build_reward("rar"))
    lf = summary["long_form"]
    assert lf["hallucination_rate"] == 0.0 and lf["extraction_failures"] == 2 and lf["unjudged_claims"] == 1
    assert FIXTURE["hallucination_rate"] == pytest.approx(0.5417, abs=1e-4)


def test_claims_final_answers_and_abstentions():
    assert parse_claims_released('Sure:\n```JSON\n["a", "b"]\n```\nmore') == (["a", "b"], None)
    assert parse_claims_released('["a", 1]')[0] == [] and parse_claims_released("none")[1].startswith("not JSON")
    assert final_answer("<think>x</think>\n <answer> A </answer>") == "A"
    assert final_answer("<think>x</think>\n  Paris ") == "Paris"
    assert final_answer("<|assistant|> Paris ") == "Paris" and final_answer(" Paris ") == " Paris "
    for answer, alone in (("I don't know", True), ("I DON'T KNOW.", True), ("\u201cI don\u2019t know\u201d", True),
                          ("I don't know, but maybe Paris", False), ("Paris. I don't know for sure.", False),
                          ("I do not know", False)):
        assert is_sole_abstention(answer) is alone, answer


def test_short_form_under_the_released_convention():
    q = Claim(id="q", text="Capital of France?", meta={"kind": "short", "answers": ["Paris"]})
    texts = iter(["I don't know, but maybe Paris.", "I don't know, but maybe Paris."])
    paper, released = run_episodes(lambda: build("rar"), [q], ScriptedLM(lambda ctx: next(texts)),
                                   RolloutConfig(temperature=0), score=False) + \
        run_episodes(lambda: build(EnvSpec(name="rar", params={"convention": "released"})), [q],
                     ScriptedLM(lambda ctx: "I don't know, but maybe Paris."), RolloutConfig(temperature=0), score=False)
    assert paper.meta["abstained"] is True and paper.meta["correct"] is False
    assert released.meta["abstained"] is False and released.meta["correct"] is True


def test_released_metric_params_are_checked(tmp_path):
    with pytest.raises(ValueError, match="no extract/judge modes"):
        write_rar_metrics(tmp_path, [], lms={"policy": Judge()}, reward=build_reward("rar"),
                          params={"convention": "released", "extract": "sentences"})
    with pytest.raises(ValueError, match="convention=released only"):
        write_rar_metrics(tmp_path, [], lms={"policy": Judge()}, reward=build_reward("rar"), params={"thinking": True})
    with pytest.raises(ValueError, match="convention must be"):
        write_rar_metrics(tmp_path, [], lms={"policy": Judge()}, reward=build_reward("rar"),
                          params={"convention": "authors"})


def test_the_linear_readers_equal_the_released_regexes_on_random_texts():
    """final_answer, the fence reader and the reward's response extraction replace the
    released regexes (quadratic on hostile input) by find calls: equal on 20,000 texts."""
    import random
    import re

    from _support import best_seconds, linear_budget
    from factrl.metrics.rar_eval_released import fenced
    from factrl.rewards.rar_released import released_content

    fence = re.compile(r"```(?:json)?\s*([\s\S]*?)\s*```", re.IGNORECASE)
    think = re.compile(r"<think>(.*?)</think>(.*)", re.DOTALL)
    answer, after = re.compile(r"<answer>(.*?)</answer>", re.DOTALL), re.compile(r"</think>(.*)", re.DOTALL)

    def reference_final(p):
        if m := answer.search(p):
            return m.group(1).strip()
        if m := after.search(p):
            return m.group(1).strip()
        cleaned = re.sub(r"<\|assistant\|>", "", p)
        return cleaned.strip() if cleaned != p else p

    rng = random.Random(0)
    atoms = ["`", "```", "json", "JSON", "j", " ", "\n", "\u00a0", "x", "[", "]", "<think>", "</think>", "<answer>",
             "</answer>", "<|assistant|>", "s", "o", "n"]
    for _ in range(20_000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 14)))
        m = fence.search(text)
        assert fenced(text) == (m.group(1) if m else None), repr(text)
        m = think.search(text)
        assert released_content(text) == (m.group(2) if m else text), repr(text)
        assert final_answer(text) == reference_final(text), repr(text)
    hostile = "<think>" * 20_000 + "```" + " " * 20_000 + "<answer>" * 10_000
    plain = ("a" * 9 + " ") * (len(hostile) // 10)

    def parse_all(text):
        return fenced(text), released_content(text), final_answer(text)

    # Relative to a plain text of the same size (the machine's load cancels out): a
    # backtracking pattern takes seconds here.
    assert best_seconds(parse_all, hostile) < linear_budget(parse_all, plain)
