"""The episode state machine: contexts, roles and segments (a sub-agent inside a turn,
a context reset), each with its own prompt and mask."""

from factrl.envs.base import EpisodeResult, StepResult, Switch
from factrl.episode import Episode, EpisodeBudget
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, Message, Verdict

CLAIM = Claim(id="c", text="Water is wet.", label="SUPPORT")


class AskHelper:
    """Turn 1 (policy) asks a question; a helper role answers it in its own fresh context
    (a sub-agent); the answer returns to the policy as an observation; then the policy
    starts over in a reset context and answers."""

    name = "ask_helper"
    stop = ("</ask>", "</final>")
    max_turns = 4
    default_reward = "veri_r1"

    def reset(self, claim):
        self.turn = 0
        self.text = ""
        return [Message(role="user", content=f"Claim: {claim.text}")]

    def step(self, text):
        self.turn += 1
        if self.turn == 1:
            return StepResult(observation=None, done=False,
                              switch=Switch(role="helper", messages=[Message(role="user", content="Q: is water wet?")],
                                            stop=("</report>",)))
        if self.turn == 2:
            return StepResult(observation="<result>yes</result>", done=False, switch=Switch(role="policy"))
        if self.turn == 3:
            return StepResult(observation=None, done=False,
                              switch=Switch(role="policy", messages=[Message(role="user", content="Fresh start.")]))
        self.text = text
        return StepResult(observation=None, done=True)

    def result(self):
        return EpisodeResult(verdict=self.parse_verdict(self.text))

    def parse_verdict(self, text):
        return Verdict(label="SUPPORT" if "SUPPORT" in text else None, answered=True, format_ok=True)


def policy(context):
    if "Fresh start." in context:
        return "<final>SUPPORT</final>"
    if "<result>" in context:
        return "<think>ok</think>"
    return "<ask>is water wet?</ask>"


def test_sub_agent_and_reset_contexts_become_segments():
    seen = []

    def helper(context):
        seen.append(context)
        return "<report>yes</report> trailing"

    trajs = run_episodes(AskHelper, [CLAIM], ScriptedLM(policy), RolloutConfig(),
                         lms={"helper": ScriptedLM(helper)})
    (t,) = trajs
    assert t.error is None and t.verdict.label is not None
    # The opening (policy) context: ask, the helper's report as an observation (mask 0), think.
    assert [x.source for x in t.turns] == ["model", "env", "model"]
    assert t.turns[0].text == "<ask>is water wet?</ask>" and t.turns[1].text == "<result>yes</result>"
    assert set(t.turns[1].mask) == {0} and set(t.turns[0].mask) == {1}
    # The helper's context: its own prompt, its own stop string, nothing of the policy's.
    helper_seg, reset_seg = t.segments
    assert helper_seg.role == "helper" and helper_seg.prompt[0].content == "Q: is water wet?"
    assert [x.text for x in helper_seg.turns] == ["<report>yes</report>"]
    assert "Claim:" not in seen[0] and "Q: is water wet?" in seen[0]
    # The reset context sees only its fresh prompt.
    assert reset_seg.role == "policy" and reset_seg.prompt[0].content == "Fresh start."
    assert [x.text for x in reset_seg.turns] == ["<final>SUPPORT</final>"]
    assert t.meta["completion_tokens"] == sum(len(x.token_ids) for s in [t, *t.segments] for x in s.turns
                                              if x.source == "model")


def test_machine_without_a_driver():
    ep = Episode(AskHelper(), CLAIM, budget=EpisodeBudget(max_turn_tokens=7, max_total_tokens=10), seed=1)
    messages = ep.start()
    ep.open([1, 2, 3])
    assert messages[0].content == "Claim: Water is wet."
    req = ep.request()
    assert req.context == [1, 2, 3] and req.max_new_tokens == 7 and req.stop == AskHelper.stop
    assert req.seed is not None and req.meta["claim_id"] == "c"
    ep.take([9] * 7, None, "<ask>q</ask>", "stop")
    need = ep.after_step(*(ep.env.step("<ask>q</ask>"), None))
    assert need.role == "helper" and need.messages[0].content == "Q: is water wet?"
    ep.give(prompt_ids=[4])
    req = ep.request()
    assert req.role == "helper" and req.context == [4] and req.stop == ("</report>",)
    ep.take([8] * 7, None, "<report>yes</report>", "stop")
    need = ep.after_step(ep.env.step("x"), None)
    assert need.role == "policy" and need.messages is None and need.observation == "<result>yes</result>"
    ep.give(observation_ids=[5, 5])
    req = ep.request()  # the policy context: 7 model + 2 observation tokens used of 10
    assert req.context == [1, 2, 3] + [9] * 7 + [5, 5] and req.max_new_tokens == 1
    ep.take([], None, "", "eos")
    assert ep.after_step(StepResult(observation="ignored", done=False), None) is None and ep.done
    assert ep.request() is None


def test_a_failing_step_is_a_recorded_error():
    ep = Episode(AskHelper(), CLAIM)
    ep.start()
    ep.open([1])
    ep.request()
    ep.take([3], None, "x", "eos")
    ep.after_step(None, "env step failed: TimeoutError: slow")
    traj = ep.trajectory()
    assert ep.done and traj.error == "env step failed: TimeoutError: slow"
