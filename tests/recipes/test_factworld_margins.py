"""How sure the warm-up was of the answers each later stage changed: the probability of
the worded conclusion comes from the recorded token log-probabilities, and a stage whose
fixes are all the warm-up's least sure answers is named."""

from __future__ import annotations

import math

import pytest

from factrl.labels import Label
from factrl.recipes.factworld_margins import Conclusion, conclusions, margin_lines, margins, reading
from factrl.runs.trajectories import append_trajectory
from factrl.types import Claim, Trajectory, Turn, Verdict

# one "token" per word (with its leading space): decode(i) is the i-th word
WORDS: list[str] = []


def _decode(i: int) -> str:
    return WORDS[i]


def _ids(text: str) -> list[int]:
    out = []
    for k, w in enumerate(text.split(" ")):
        WORDS.append(w if k == 0 else " " + w)
        out.append(len(WORDS) - 1)
    return out


def _traj(cid: str, final: str, logprob_of: dict[str, float] | None) -> Trajectory:
    ids = _ids(final)
    lps = None if logprob_of is None else [logprob_of.get(WORDS[i].strip(), 0.0) for i in ids]
    claim = Claim(id=cid, text="t", label=Label.SUPPORT)
    turns = [Turn(source="model", text="<question>q</question>", token_ids=[0], mask=[1], logprobs=[0.0]),
             Turn(source="env", text="r", token_ids=[0], mask=[0]),
             Turn(source="model", text=final, token_ids=ids, mask=[1] * len(ids), logprobs=lps)]
    return Trajectory(claim_id=cid, env="haris", claim=claim, prompt=[], turns=turns,
                      verdict=Verdict(label=Label.REFUTE))


def test_the_conclusion_probability_is_the_product_from_so_to_its_word(tmp_path):
    WORDS.clear()
    WORDS.append("x")
    path = tmp_path / "trajectories.jsonl"
    with path.open("w") as fh:
        append_trajectory(fh, _traj("a", "The claim says 3. Found 3. Same, so the claim is refuted.",
                                    {"so": -0.1, "refuted.": -0.4, "Same,": -2.0}))
        append_trajectory(fh, _traj("b", "The search agent found nothing that supports the claim, "
                                         "so the claim is not supported.", {"not": -0.2}))
        append_trajectory(fh, _traj("c", "No sentence gives it, so there is not enough information.", {}))
        append_trajectory(fh, _traj("d", "Same, so the claim is refuted.", None))  # no log-probabilities
        append_trajectory(fh, _traj("e", "I do not know.", {}))  # no worded conclusion
    got = conclusions(path, _decode)
    assert got["a"] == Conclusion("Same", "refuted", pytest.approx(math.exp(-0.5)))  # not the reading's -2.0
    assert got["b"].word == "not supported" and got["b"].p == pytest.approx(math.exp(-0.2))
    assert got["b"].reading == "not found"
    assert got["c"] == Conclusion("not found", "not enough", 1.0)
    assert got["d"] == Conclusion("Same", None, None)
    assert got["e"] == Conclusion("other", None, None)


def test_the_stages_fixes_are_set_against_the_errors_they_left():
    assert reading("Different, so the claim is refuted.") == "Different"
    warm = {f"low{i}": Conclusion("Same", "refuted", 0.5 + i / 100) for i in range(5)}
    warm |= {f"high{i}": Conclusion("Same", "refuted", 0.95) for i in range(4)}
    warm |= {f"ok{i}": Conclusion("Different", "refuted", 0.99) for i in range(4)}
    correct = {"warmup": {**{k: False for k in warm if not k.startswith("ok")}, **{f"ok{i}": True for i in range(4)}}}
    correct["control-shuffle_rewards@100%"] = {**correct["warmup"], **{f"low{i}": True for i in range(5)}}
    correct["control-invert_mask@100%"] = {**correct["warmup"], **{f"low{i}": True for i in range(4)}}
    correct["grpo@100%"] = {**{k: True for k in warm}, "ok0": False}
    m = margins(warm, correct)
    assert m["warmup"]["Same -> refuted (wrong)"] == {"n": 9, "median": pytest.approx(0.54), "min": 0.5,
                                                      "max": 0.95, "q1": pytest.approx(0.52)}
    drift = m["stages"]["control-shuffle_rewards@100%"]
    assert (drift["fixed"]["claims"], drift["still_wrong"]["claims"], drift["broken"]["claims"]) == (5, 4, 0)
    assert drift["fixed"]["max"] == pytest.approx(0.54) and drift["still_wrong"]["q1"] == 0.95
    real = m["stages"]["grpo@100%"]
    assert (real["fixed"]["claims"], real["still_wrong"]["claims"], real["broken"]["claims"]) == (9, 0, 1)
    # within the one cell of wrong answers (Same -> refuted), the five fixes are the five least
    # sure of nine: 1 of the C(9, 5) = 126 ways to split them
    assert drift["fixes_lower"] == {"Same -> refuted": {"fixed": 5, "left": 4, "p": pytest.approx(1 / 126),
                                                        "p_holm": pytest.approx(1 / 126)}}  # one cell: unadjusted
    assert m["stages"]["control-invert_mask@100%"]["fixes_lower"]["Same -> refuted"]["p"] == pytest.approx(1 / 126)
    assert real["fixes_lower"] == {}  # it left none of them: nothing to set its fixes against
    text = "\n".join(margin_lines(m))
    assert "- control-shuffle_rewards@100%: of the warm-up's `Same -> refuted` errors, the 5 fixed sat lower" in text
    assert "p = 0.0079" in text
    assert "- grpo@100%:" not in text  # it fixed sure and unsure errors alike
    # fixes spread over the margins are not drift's signature
    spread = {**correct["warmup"], "low0": True, "low4": True, "high0": True, "high1": True}
    m = margins(warm, {"warmup": correct["warmup"], "grpo@50%": spread})
    assert m["stages"]["grpo@50%"]["fixes_lower"]["Same -> refuted"]["p"] > 0.3
    assert "- grpo@50%:" not in "\n".join(margin_lines(m))
    assert margins({"a": Conclusion("other", None, None)}, {"warmup": {"a": True}}) is None
    assert margin_lines(None) == []


def test_a_stage_tested_in_several_cells_is_flagged_only_where_the_adjusted_p_holds():
    # two cells of wrong answers: in each the stage fixed the least sure, at p = 1/10 in the
    # first (2 of 5) and 1/126 in the second (5 of 9); Holm doubles the smaller, keeps the larger
    warm = {f"a{i}": Conclusion("Same", "refuted", 0.5 + i / 100) for i in range(5)}
    warm |= {f"b{i}": Conclusion("Different", "supported", 0.5 + i / 100) for i in range(9)}
    base = {k: False for k in warm}
    fixed = {"a0", "a1", *(f"b{i}" for i in range(5))}
    m = margins(warm, {"warmup": base, "control-shuffle_rewards@100%": {k: k in fixed for k in warm}})
    cells = m["stages"]["control-shuffle_rewards@100%"]["fixes_lower"]
    assert cells["Same -> refuted"]["p"] == pytest.approx(1 / 10)
    assert cells["Different -> supported"]["p"] == pytest.approx(1 / 126)
    assert cells["Different -> supported"]["p_holm"] == pytest.approx(2 / 126)
    assert cells["Same -> refuted"]["p_holm"] == pytest.approx(1 / 10)
    text = "\n".join(margin_lines(m))
    assert "`Different -> supported` errors, the 5 fixed" in text and "0.016 adjusted over the stage's 2 cells" in text
    assert "`Same -> refuted` errors" not in text
    # a result written before the adjustment (no p_holm) is read by its p
    m["stages"]["control-shuffle_rewards@100%"]["fixes_lower"] = {"Same -> refuted": {"fixed": 2, "left": 3, "p": 0.04}}
    assert "`Same -> refuted` errors, the 2 fixed" in "\n".join(margin_lines(m))
