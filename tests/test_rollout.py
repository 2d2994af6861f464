"""The batched driver: an episode's result does not depend on its batch, and episodes of
different environments batch together."""

import pytest

from factrl.envs.base import EpisodeResult, StepResult
from factrl.envs.veri_r1 import VeriR1Env
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import Job, RolloutConfig, run_episodes, run_jobs
from factrl.types import Claim, EvidenceRef, Message, Passage, Verdict

from _support import WordOverlapRetriever

PASSAGES = [Passage(id="nile#0", doc_id="nile", title="Nile", text="It flows north.",
                    sentence_ids=["nile_sentence_0"], sentences=["It flows north."])]
SHORT = Claim(id="short", text="The Nile flows north.", label="SUPPORT", evidence=[EvidenceRef(id="nile_sentence_0")])
LONG = Claim(id="long", text="Rivers are long.", label="NEI")
ANSWER = ("<think>" + "The Nile runs from the south to the Mediterranean. " * 6 + "</think>\n"
          "<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_0]]\n</answer>")


def respond(context: str) -> str:
    if "Rivers are long." in context:  # a long first turn that fills most of its budget
        return "<plan>" + "x" * 480 + "</plan><search>Nile north</search>"
    if context.count("<information>") < 2:
        return "<plan>p</plan><search>Nile north</search>"
    return ANSWER


def make_env():
    return VeriR1Env(WordOverlapRetriever(PASSAGES))


CFG = RolloutConfig(max_new_tokens=512, max_total_tokens=700, batch_size=8)


def _key(t):
    return (t.prompt_ids, t.completion_ids, t.completion_mask, [x.text for x in t.turns], t.verdict, t.reward)


def test_an_episode_is_the_same_alone_and_beside_a_long_one():
    (alone,) = run_episodes(make_env, [SHORT], ScriptedLM(respond), CFG)
    assert len(ANSWER) > 300 and alone.reward.total == pytest.approx(4.0)
    for batch in ([LONG, SHORT], [SHORT, LONG, LONG], [LONG] * 5 + [SHORT]):
        trajs = run_episodes(make_env, batch, ScriptedLM(respond), CFG)
        ours = next(t for t in trajs if t.claim_id == "short")
        assert _key(ours) == _key(alone)
        long = next(t for t in trajs if t.claim_id == "long")
        assert sum(len(x.token_ids) for x in long.turns) > 500  # the neighbour did use its budget


def test_each_episode_keeps_its_own_total_budget():
    cfg = RolloutConfig(max_new_tokens=512, max_total_tokens=560)
    (long,) = run_episodes(make_env, [LONG], ScriptedLM(respond), cfg)
    assert sum(len(x.token_ids) for x in long.turns) <= 560 + 200  # at most one observation past it
    assert long.turns[-1].source == "env" or long.turns[-1].finish_reason == "length"


class Shout:
    """A one-turn toy environment with other stop strings than Veri-R1's."""

    name = "shout"
    stop = ("!",)
    max_turns = 1
    default_reward = "veri_r1"

    def reset(self, claim):
        self.text = ""
        return [Message(role="user", content=f"Shout about {claim.text}")]

    def step(self, text):
        self.text = text
        return StepResult(observation=None, done=True)

    def result(self):
        return EpisodeResult(verdict=self.parse_verdict(self.text))

    def parse_verdict(self, text):
        return Verdict(label="SUPPORT" if text.endswith("!") else None, answered=True)


def test_episodes_of_different_environments_share_generate_calls():
    def respond_any(context):
        return "HEY! and more" if "Shout about" in context else respond(context)

    lm = ScriptedLM(respond_any)
    jobs = [Job(make_env, SHORT), Job(Shout, SHORT), Job(Shout, LONG)]
    trajs = run_jobs(jobs, lm, CFG)
    assert lm.calls == 2  # two rounds (Veri-R1 needs two turns; the shouts ride in the first), not a call per env
    assert [t.env for t in trajs] == ["veri_r1", "shout", "shout"]
    assert trajs[1].model_text == "HEY!"  # its own stop string
    assert trajs[0].reward.total == pytest.approx(4.0) and trajs[0].model_text.endswith("</answer>")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    pytest.importorskip("torch")
    from factrl.lm.hf import HFLM
    from factrl.lm.tiny import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4)
    return HFLM.load(str(path))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_real_model_gives_the_same_episode_in_any_batch(tiny_lm, temperature):
    claims = [Claim(id=f"c{i}", text="word " * (3 + 7 * i), label="SUPPORT") for i in range(4)]
    cfg = RolloutConfig(temperature=temperature, max_new_tokens=24, max_total_tokens=60, seed=5, batch_size=4)
    batched = run_episodes(make_env, claims, tiny_lm, cfg)
    for claim, together in zip(claims, batched):
        (alone,) = run_episodes(make_env, [claim], tiny_lm, cfg)
        assert alone.completion_ids == together.completion_ids
        assert alone.reward == together.reward


class FlakyLM(ScriptedLM):
    """Fails the rows of one claim (per-row failures), or a whole call (``down``)."""

    def __init__(self, bad_claim=None, down_after=None):
        super().__init__(respond)
        self.bad_claim, self.down_after = bad_claim, down_after

    def generate(self, prompts, config):
        from factrl.lm.base import RowFailures, row_configs

        if self.down_after is not None and self.calls >= self.down_after:
            self.calls += 1
            raise ConnectionError("LM server unreachable")
        gens = super().generate(prompts, config)
        cfgs = row_configs(len(prompts), config)
        bad = [c.meta.get("claim_id") == self.bad_claim for c in cfgs]
        if any(bad):
            raise RowFailures([None if b else g for g, b in zip(gens, bad)],
                              [TimeoutError("no answer in 1s") if b else None for b in bad])
        return gens


def test_a_failed_row_fails_its_episode_and_the_batch_goes_on():
    trajs = run_episodes(make_env, [SHORT, LONG, SHORT], FlakyLM(bad_claim="long"), CFG)
    assert [t.error for t in trajs] == [None, "generate failed: TimeoutError: no answer in 1s", None]
    assert trajs[0].reward.total == pytest.approx(4.0) and trajs[2].reward.total == pytest.approx(4.0)
    assert trajs[1].turns == [] and trajs[1].verdict.label is None


def test_a_failed_call_fails_its_episodes_with_the_reason_counted():
    from factrl.metrics.failures import FailureCounts

    lm = FlakyLM(down_after=1)  # the first round answers, the second finds the server down
    trajs = run_episodes(make_env, [SHORT, SHORT.model_copy(update={"id": "short2"})], lm, CFG)
    assert all(t.error == "generate failed: ConnectionError: LM server unreachable" for t in trajs)
    assert all(len([x for x in t.turns if x.source == "model"]) == 1 for t in trajs)  # the first turn is kept
    counts = FailureCounts()
    for t in trajs:
        counts.add(t.verdict, error=t.error)
    assert counts.to_dict()["episode_errors"] == {"generate/ConnectionError": 2}


class TwoRoles:
    """Opens a second role's context after its first turn (``switch_after``: 1) or never;
    the roles have their own temperatures and limits (RoleSampling)."""

    name, stop, default_reward = "two_roles", (), "label_only"

    def __init__(self, switch_after):
        from factrl.envs.base import RoleSampling

        self.switch_after, self.max_turns, self.turns = switch_after, 3, 0
        self.sampling = {"policy": RoleSampling(temperature=0.1, max_new_tokens=5),
                         "helper": RoleSampling(temperature=0.9, max_context_tokens=3)}

    def reset(self, claim):
        self.turns = 0
        return [Message(role="user", content=claim.text)]

    def step(self, text):
        from factrl.envs.base import Switch

        self.turns += 1
        if self.turns == self.switch_after:
            return StepResult(observation=None, done=False,
                              switch=Switch(role="helper", messages=[Message(role="user", content="help")]))
        return StepResult(observation=None, done=self.turns >= 3)

    def result(self):
        return EpisodeResult(verdict=Verdict())

    def parse_verdict(self, text):
        return Verdict()


def test_roles_sample_at_their_own_temperature_and_limits_in_one_batch():
    """One LM plays two roles at different temperatures in the same round: the rows go in
    separate calls (one call's rows must share a temperature), each with its role's limits."""
    calls = []

    class Recording(ScriptedLM):
        def generate(self, prompts, config):
            calls.append([(c.meta["role"], c.temperature, c.max_new_tokens) for c in config])
            return super().generate(prompts, config)

    lm = Recording(lambda ctx: "abcdefghij")
    jobs = [Job(lambda: TwoRoles(1), Claim(id="a", text="a")), Job(lambda: TwoRoles(0), Claim(id="b", text="b"))]
    trajs = run_jobs(jobs, lm, RolloutConfig(temperature=0.5, max_new_tokens=50, batch_size=2), score=False)
    assert all(len({t for _, t, _ in call}) == 1 for call in calls)  # one temperature per call
    rows = {row for call in calls for row in call}
    assert rows == {("policy", 0.1, 5), ("helper", 0.9, 3)}
    # round 2 had a policy row (b) and a helper row (a): two calls
    assert any(len(c) == 1 for c in calls[1:3]) and len(calls) >= 3
    (seg,) = trajs[0].segments
    assert sum(len(t.token_ids) for t in seg.turns) == 3  # the helper's context cap
    assert all(len(t.token_ids) == 5 for t in trajs[1].turns)


class ThreeTurnEnv:
    """Any text is a turn; an observation follows each, three turns an episode."""

    name, stop, max_turns, default_reward = "three_turns", (), 3, "veri_r1"

    def reset(self, claim):
        self.turns = 0
        return [Message(role="system", content="Read each observation and go on. " * 4),
                Message(role="user", content=claim.text)]

    def step(self, text):
        self.turns += 1
        return StepResult(observation=f" Observation {self.turns}: two passages, one about rivers.",
                          done=self.turns >= 3)

    def result(self):
        return EpisodeResult(verdict=Verdict())

    def parse_verdict(self, text):
        return Verdict()


def test_a_real_model_prefills_only_new_tokens_on_later_turns_and_plays_the_same(tiny_lm, monkeypatch):
    claims = [Claim(id=f"c{i}", text="word " * (3 + 7 * i), label="SUPPORT") for i in range(3)]
    cfg = RolloutConfig(temperature=1.0, max_new_tokens=12, max_total_tokens=200, seed=3, batch_size=3)
    caches = []
    reuse = type(tiny_lm).reuse_turns

    def spy(self, budget_gb=None):
        cm = reuse(self, budget_gb)
        caches.append(cm)
        return cm

    monkeypatch.setattr(type(tiny_lm), "reuse_turns", spy)
    monkeypatch.setenv("FACTRL_TURN_CACHE_GB", "0")
    plain = run_episodes(ThreeTurnEnv, claims, tiny_lm, cfg, score=False)
    monkeypatch.setenv("FACTRL_TURN_CACHE_GB", "1")
    stats = []
    real_prefill = tiny_lm.__class__._prefill

    def prefill(self, prompts, reserve):
        stats.append(self._turns.stats if self._turns is not None else None)
        return real_prefill(self, prompts, reserve)

    monkeypatch.setattr(type(tiny_lm), "_prefill", prefill)
    reused = run_episodes(ThreeTurnEnv, claims, tiny_lm, cfg, score=False)
    assert len(caches) == 2  # drive opened the block on each run
    assert [len(t.turns) for t in reused] == [5, 5, 5]  # three model turns, the observations between
    assert [_key(t) for t in plain] == [_key(t) for t in reused]
    last = stats[-1]
    assert last is not None and last.hits == 6  # turns 2 and 3 of each episode
    assert tiny_lm._turns is None
