"""Broken-trainer controls (factrl.train.controls): each fault is applied exactly as named."""

from __future__ import annotations

import pytest

from factrl.train.controls import UNALTERED, apply_control, check_control, echo_flags, echoed_tokens


def _out():
    return {
        "prompt_ids": [[1], [1], [2], [2]],
        "completion_ids": [[5, 6, 7, 8, 2], [5, 9, 2], [5, 2], [5, 6, 2]],
        "env_mask": [[1, 0, 0, 1, 0], [1, 1, 1], [1, 1], [1, 0, 1]],
        "_inserted": [[0, 1, 1, 0, 0], [0, 0, 0], [0, 0], [0, 1, 0]],
        "reward_total": [1.0, 3.0, 0.0, 2.0],
    }


PROMPTS = ["a", "a", "b", "b"]


def test_none_changes_nothing():
    out = _out()
    assert apply_control(out, PROMPTS, "none", total="reward_total", seed=0) == _out()


def test_flip_negates_every_optimised_reward_and_keeps_the_truth():
    out = apply_control(_out(), PROMPTS, "flip_advantage", total="reward_total", seed=0)
    assert out["reward_total"] == [-1.0, -3.0, -0.0, -2.0]
    assert out[UNALTERED] == [1.0, 3.0, 0.0, 2.0]
    # group-normalised advantages flip sign exactly
    for rows in ([0, 1], [2, 3]):
        true = [_out()["reward_total"][i] for i in rows]
        got = [out["reward_total"][i] for i in rows]
        mt, mg = sum(true) / 2, sum(got) / 2
        assert [g - mg for g in got] == [-(t - mt) for t in true]


def test_shuffle_permutes_within_groups_only():
    seen = set()
    for seed in range(20):
        out = apply_control(_out(), PROMPTS, "shuffle_rewards", total="reward_total", seed=seed)
        assert sorted(out["reward_total"][:2]) == [1.0, 3.0] and sorted(out["reward_total"][2:]) == [0.0, 2.0]
        seen.add(tuple(out["reward_total"]))
    assert len(seen) > 1  # it does shuffle


def test_invert_mask_trains_observations_and_masks_model_tokens():
    out = apply_control(_out(), PROMPTS, "invert_mask", total="reward_total", seed=0)
    # token 4 of row 0 is the bridge's closing EOS (neither sampled nor inserted): stays 0
    assert out["env_mask"] == [[0, 1, 1, 0, 0], [0, 0, 0], [0, 0], [0, 1, 0]]
    assert out["reward_total"] == [1.0, 3.0, 0.0, 2.0]


def test_unknown_control_is_refused():
    with pytest.raises(ValueError, match="grpo.control must be one of"):
        check_control("reverse")


def test_config_refuses_a_bad_control():
    from factrl.train.config import load_run_config

    with pytest.raises(ValueError, match="grpo.control"):
        load_run_config("veri_r1_offline_cpu", {"grpo.control": "nope"})
    assert load_run_config("veri_r1_offline_cpu", {"grpo.control": "invert_mask"}).grpo.control == "invert_mask"


def test_echoed_tokens_counts_observations_that_repeat_the_models_own_output():
    question = [11, 12, 13, 14]  # the model's own question
    quote = [21, 22, 23, 24]  # a sentence it was shown, then quoted
    stream = [([1, 2, 3], "prompt"), ([*quote, 5, 6], "env"),  # a search result
              ([7, *quote, 9, *question], "model"),  # quotes the result, then asks its question
              ([30, *question, 31, *quote], "env")]  # a record that lists the question and the sentence
    # only the question is echoed: the quote was the environment's before the model wrote it
    assert echoed_tokens([stream], n=4) == (4, 6 + 10)
    assert echoed_tokens([stream], n=5) == (0, 16)  # no run of five
    assert echoed_tokens([stream, stream], n=4) == (8, 32)  # summed over streams, each on its own
    assert echoed_tokens([[([*question], "prompt"), ([*question], "model"), ([*question], "env")]], n=4) == (0, 4)
    assert echoed_tokens([], n=4) == (0, 0)
    with pytest.raises(ValueError):
        echoed_tokens([stream], n=0)
    with pytest.raises(ValueError, match="kind"):
        echoed_tokens([[([1], "tool")]])


def _row(question):
    quote = [21, 22, 23, 24, 25, 26, 27, 28]  # a sentence it was shown, then quoted
    # prompt [1, 2, 3]; completion: a search result, the model's quote and question, a record
    # repeating both, then the model's verdict and the bridge's closing EOS
    q = len(question)
    ids = [*quote, 5, 6, 7, *quote, 9, *question, 30, *question, 31, *quote, 40, 2]
    inserted = [1] * 10 + [0] * (10 + q) + [1] * (10 + q) + [0, 0]
    mask = [0] * 10 + [1] * (10 + q) + [0] * (10 + q) + [1, 0]
    return {"prompt_ids": [[1, 2, 3]], "completion_ids": [ids], "env_mask": [mask], "_inserted": [inserted],
            "reward_total": [1.0]}, inserted


def test_invert_mask_no_echo_also_masks_observation_tokens_that_echo_the_models_own():
    out, inserted = _row(list(range(50, 58)))  # a question of eight tokens: a run long enough to count
    assert apply_control(out, ["a"], "invert_mask", total="reward_total", seed=0)["env_mask"][0] == inserted
    out, _ = _row(list(range(50, 58)))
    strict = apply_control(out, ["a"], "invert_mask_no_echo", total="reward_total", seed=0)["env_mask"][0]
    # the record's copy of the question is masked; the search result and the record's
    # quote of it (the environment's own sentence) stay trained
    assert strict == [1] * 10 + [0] * 18 + [1] + [0] * 8 + [1] * 9 + [0, 0]
    assert sum(strict) == sum(inserted) - 8
    # a question shorter than eight tokens is not counted as an echo: the two controls agree
    out, inserted = _row([11, 12, 13, 14])
    assert apply_control(out, ["a"], "invert_mask_no_echo", total="reward_total", seed=0)["env_mask"][0] == inserted


def test_echo_flags_marks_each_echoed_observation_token():
    question = [11, 12, 13, 14]
    flags = echo_flags([([1, 2], "prompt"), ([*question, 7], "model"), ([30, *question, 31], "env")], n=4)
    assert flags == [[False, False], [False] * 5, [False, True, True, True, True, False]]
    with pytest.raises(ValueError, match="kind"):
        echo_flags([([1], "tool")], n=1)
