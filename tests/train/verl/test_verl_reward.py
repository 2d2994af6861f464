import numpy as np
import pytest

from factrl.envs.veri_r1 import VeriR1Config, VeriR1Env
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import run_episodes
from factrl.train.verl.reward import MODEL_TEXT_KEY, SCORE_KEYS, compute_score, strip_system_information
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

TRUTH = {"label": "SUPPORT", "evidence": ["nile_sentence_1"]}
PLAN = "<plan>Find where the Nile flows.</plan>\n"
SEARCH = "<search>Nile flows north</search>"
SYSTEM_INFO = "\n\n<information>\n[[nile_sentence_1]]: It flows north.\n</information>\n\n"
THINK = "<think>The Nile flows north.</think>\n"
ANSWER = "<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_1]]\n</answer>"


def score(response, truth=TRUTH, extra=None, **kw):
    return compute_score("toy", response, truth, extra if extra is not None else {"split": "train"}, **kw)


def test_correct_answer_with_system_information_scores_four():
    out = score(PLAN + SEARCH + SYSTEM_INFO + THINK + ANSWER)
    assert out == {"score": 4.0, "format": 1.0, "evidence": 1.0, "label": 2.0, "validity": 1.0, "hit_rate": 1.0}
    assert tuple(out) == SCORE_KEYS


def test_only_information_right_after_search_is_removed():
    text = PLAN + SEARCH + SYSTEM_INFO + THINK + "<information>[[x]]: mine</information>" + ANSWER
    stripped = strip_system_information(text)
    assert stripped == PLAN + SEARCH + "\n\n" + THINK + "<information>[[x]]: mine</information>" + ANSWER


def test_self_written_information_fails_the_format():
    # Written by the model after its plan (no search before it): the format reward is lost,
    # label and evidence still count (the formula is applied literally).
    out = score(PLAN + "<information>\n[[nile_sentence_1]]: It flows north.\n</information>\n" + THINK + ANSWER)
    assert out["format"] == 0.0 and out["label"] == 2.0 and out["evidence"] == 1.0
    assert out["score"] == 3.0
    # Two blocks after one search: the second is the model's own.
    out = score(PLAN + SEARCH + SYSTEM_INFO + "<information>[[nile_sentence_1]]: fake</information>" + THINK + ANSWER)
    assert out["format"] == 0.0


@pytest.mark.parametrize(
    "response",
    [
        "",
        "The claim is true.",
        "<plan>p</plan><answer>Label: SUPPORT",  # never closed
        "<answer>\nLabel: PROBABLY\nEvidence: none\n</answer>",
        "<<<>>></search><information>",
        None,
    ],
)
def test_malformed_responses_score_zero_without_raising(response):
    out = score(response)
    assert out["score"] == 0.0 and out["format"] == 0.0
    assert set(out) == set(SCORE_KEYS)


def test_authors_ground_truth_spellings_and_numpy_evidence():
    nei = PLAN + SEARCH + SYSTEM_INFO + THINK + "<answer>\nLabel: NOT ENOUGH INFO\nEvidence: [[a_sentence_1]]\n</answer>"
    truth = {"label": "NOT ENOUGH INFO", "evidence": np.array(["a_sentence_1", "b_sentence_2"], dtype=object)}
    out = score(nei, truth)
    # NEI needs no evidence for the label; IoU 1/2.
    assert out == {"score": 3.5, "format": 1.0, "evidence": 0.5, "label": 2.0, "validity": 1.0, "hit_rate": 0.5}
    assert score(PLAN + SEARCH + SYSTEM_INFO + THINK + ANSWER, {"label": "SUPPORTS", "evidence": ("nile_sentence_1",)})["score"] == 4.0
    assert score(ANSWER, '{"label": "REFUTE", "evidence": []}')["label"] == 0.0


def test_bad_ground_truth_is_a_clear_error():
    with pytest.raises(ValueError, match="no label"):
        score(ANSWER, {"evidence": []})
    with pytest.raises(ValueError, match="list of ids"):
        score(ANSWER, {"label": "SUPPORT", "evidence": "nile_sentence_1"})
    with pytest.raises(ValueError, match="unknown label"):
        score(ANSWER, {"label": "MAYBE", "evidence": []})


def test_model_text_from_the_agent_loop_is_scored_directly():
    model_text = PLAN + SEARCH + THINK + ANSWER
    assert score("garbled", extra={MODEL_TEXT_KEY: model_text})["score"] == 4.0


def test_offline_mode_from_split_or_argument():
    offline = THINK + ANSWER
    assert score(offline, extra={"split": "test_off"})["format"] == 1.0
    assert score(offline, extra={"mode": "offline"})["format"] == 1.0
    assert score(offline, extra={"split": "train_online"})["format"] == 0.0  # online needs <plan>
    assert score(offline, extra={}, env_params={"mode": "offline"})["score"] == 4.0
    with pytest.raises(ValueError, match="mode"):
        score(offline, env_params={"mode": "sideways"})


def test_mode_is_a_deprecated_alias_of_the_mode_parameter(monkeypatch):
    import warnings

    from factrl import components

    monkeypatch.setattr(components, "_MODE_WARNED", set())
    offline = THINK + ANSWER
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert score(offline, extra={}, mode="offline")["score"] == 4.0
        assert score(offline, extra={}, mode="offline")["score"] == 4.0
    assert len([w for w in caught if issubclass(w.category, FutureWarning)]) == 1  # once, not per sample
    # an explicit env_params mode wins over the deprecated shorthand
    assert score(offline, extra={}, mode="offline", env_params={"mode": "online"})["format"] == 0.0


def test_rows_recorded_under_an_environment_alias_score_as_its_registry_name():
    offline = THINK + ANSWER
    assert score(offline, extra={"env": "veri_r1_offline", "env_params": "{}"})["score"] == 4.0
    assert score(offline, env="veri_r1_offline")["score"] == 4.0


def test_reward_kwargs_reach_the_reward_config():
    out = score(PLAN + SEARCH + SYSTEM_INFO + THINK + ANSWER, reward={"evidence_weight": 0.0})
    assert out["score"] == 3.0 and out["evidence"] == 1.0
    # More searches than allowed break the format.
    three = PLAN + (SEARCH + SYSTEM_INFO + THINK) * 3 + ANSWER
    assert score(three)["format"] == 1.0
    assert score(three, max_searches=2)["format"] == 0.0


PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_sentence_0", "nile_sentence_1"], sentences=["The Nile is long.", "It flows north."]),
]
CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORT",
              evidence=[EvidenceRef(id="nile_sentence_1", doc_id="nile")])


@pytest.mark.parametrize("n_searches, max_turns", [(1, 4), (3, 4), (4, 6)])
def test_decoded_transcript_scores_like_the_environment(n_searches, max_turns):
    """verl decodes model + observation text; the shim must agree with the env's own
    reward, including the budget notice after the last search and the over-budget block."""
    turns = [PLAN + SEARCH] + [THINK + SEARCH] * (n_searches - 1) + [THINK + ANSWER]

    def respond(context: str) -> str:  # the prompt itself shows one "<search>…</search>"
        return turns[min(context.count("</search>") - 1, len(turns) - 1)]

    cfg = VeriR1Config(max_turns=max_turns)
    (traj,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES), cfg), [CLAIM], ScriptedLM(respond))
    assert traj.error is None and len(traj.searches) == n_searches
    out = score(traj.transcript, {"label": "SUPPORT", "evidence": ["nile_sentence_1"]})
    assert out["score"] == pytest.approx(traj.reward.total)
    assert out["format"] == traj.reward.components["format"] == (1.0 if n_searches <= 3 else 0.0)


def test_information_must_be_followed_by_think():
    # The paper's prompt and the authors' code: reason in <think> after every <information>.
    no_think = PLAN + SEARCH + SYSTEM_INFO + SEARCH + SYSTEM_INFO + THINK + ANSWER
    straight_to_answer = PLAN + SEARCH + SYSTEM_INFO + ANSWER
    for response in (no_think, straight_to_answer):
        for convention in ("paper", "authors_code"):
            out = score(response, reward={"convention": convention})
            assert (out["format"], out["score"]) == (0.0, 3.0), (convention, response)


def test_response_cut_inside_an_observation():
    assert strip_system_information(PLAN + SEARCH + "\n\n<information>\n[[a]]: half") == PLAN + SEARCH
