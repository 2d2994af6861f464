"""HARIS rewards: the high level on verdicts, the low level from a scripted LM judge
(parse failures and failing judges counted, never read as "not useful")."""

import pytest

from factrl.lm.base import RowFailures
from factrl.lm.scripted import ScriptedLM
from factrl.rewards import RewardDeps, RewardSpec, build_reward
from factrl.rewards.haris import parse_judge
from factrl.types import Claim, Trajectory, Verdict

Q = Claim(id="q1", text="Which direction does the Nile flow?", label="SUPPORT", meta={"pseudo_answer": "North"})


def traj(report="The Nile flows north.", ok=True, error=None, claim=Q):
    return Trajectory(claim_id=claim.id, env="haris_searcher", claim=claim, prompt=[],
                      verdict=Verdict(format_ok=ok, answered=report is not None), error=error,
                      meta={"report": report})


def judge_saying(*answers):
    """A judge answering in order, one reply per conversation; records what it was asked."""
    asked = []

    def respond(ctx):
        asked.append(ctx)
        return answers[len(asked) - 1]
    lm = ScriptedLM(respond)
    lm.asked = asked
    return lm


def low(judge):
    return build_reward(RewardSpec(name="haris_low"), RewardDeps(lms={"judge": judge}))


@pytest.mark.parametrize("reply, total, useful, failed", [
    ("yes", 1.0, 1.0, 0.0),
    ("Yes.", 1.0, 1.0, 0.0),
    ("is_useful: yes", 1.0, 1.0, 0.0),
    ("No", 0.1, 0.0, 0.0),
    ("no, it does not say", 0.1, 0.0, 0.0),
    ("maybe", 0.1, 0.0, 1.0),
    ("", 0.1, 0.0, 1.0),
    ("yes and no", 0.1, 0.0, 1.0),
    ("yesterday it was unclear", 0.1, 0.0, 1.0),
])
def test_judge_replies(reply, total, useful, failed):
    judge = judge_saying(reply)
    (rb,) = low(judge).score([traj()])
    assert rb.total == pytest.approx(total)
    assert rb.components["useful"] == useful and rb.components["judge_failed"] == failed
    assert rb.components["format"] == 1.0
    (asked,) = judge.asked
    assert "Which direction does the Nile flow?" in asked and "North" in asked and "The Nile flows north." in asked


def test_malformed_episodes_score_zero_without_asking_the_judge():
    judge = judge_saying("yes", "no")
    rbs = low(judge).score([traj(report=None, ok=False), traj(), traj(error="generate failed: x"), traj()])
    assert [r.total for r in rbs] == [0.0, 1.0, 0.0, 0.1]
    assert len(judge.asked) == 2 and [r.components["judge_failed"] for r in rbs] == [0.0] * 4


class FailingJudge(ScriptedLM):
    def __init__(self, rows_fail=None):
        super().__init__(lambda ctx: "yes")
        self.rows_fail = rows_fail

    def complete(self, conversations, config):
        gens = super().complete(conversations, config)
        if self.rows_fail is None:
            raise ConnectionError("judge server down")
        errs = [RuntimeError("500") if i in self.rows_fail else None for i in range(len(gens))]
        raise RowFailures([None if e else g for g, e in zip(gens, errs)], errs)


def test_a_failing_judge_is_counted_per_row():
    rbs = low(FailingJudge()).score([traj(), traj()])
    assert [r.components["judge_failed"] for r in rbs] == [1.0, 1.0] and [r.total for r in rbs] == [0.1, 0.1]
    rbs = low(FailingJudge(rows_fail={1})).score([traj(), traj()])
    assert [r.components["judge_failed"] for r in rbs] == [0.0, 1.0] and [r.total for r in rbs] == [1.0, 0.1]


def test_missing_judge_or_pseudo_answer_is_a_clear_error():
    with pytest.raises(ValueError, match="needs a judge LM"):
        build_reward("haris_low").score([traj()])
    with pytest.raises(ValueError, match="pseudo_answer"):
        low(judge_saying("yes")).score([traj(claim=Claim(id="q2", text="Who?", label="SUPPORT"))])


def test_parse_judge():
    assert parse_judge("YES") is True and parse_judge("no.") is False and parse_judge("unsure") is None


def test_high_reward_parameters():
    r = build_reward(RewardSpec(name="haris_high", params={"wrong": 0.2}))
    t = traj()
    t.verdict = Verdict(label="REFUTE", format_ok=True, answered=True)
    assert r(t).total == pytest.approx(0.2)
    with pytest.raises(ValueError, match="haris_high"):
        build_reward(RewardSpec(name="haris_high", params={"bogus": 1}))


@pytest.mark.parametrize("report, useful", [
    ("North. The Nile flows north.", True),
    ("the nile flows NORTH!", True),
    ("The Nile flows northward.", False),  # words, not substrings: "north" is not "northward"
    ("No passage found answers this question.", False),
])
def test_the_exact_judge_reads_the_pseudo_answer_in_the_report(report, useful):
    (rb,) = low("exact").score([traj(report=report)])
    assert rb.components["useful"] == float(useful) and rb.components["judge_failed"] == 0.0
    assert rb.total == pytest.approx(1.0 if useful else 0.1)
    (bad,) = low("exact").score([traj(report=None, ok=False)])
    assert bad.total == 0.0
