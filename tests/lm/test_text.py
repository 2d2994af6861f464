"""The LM protocol's text-level calls (complete, score_choices) on the token-level ones."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from factrl.lm import LM, GenerationConfig
from factrl.lm.base import Generation
from factrl.lm.scripted import ScriptedLM
from factrl.lm.text import TokenTextMixin, choice_probs, cut_at_stop
from factrl.types import Message

CONVERSATIONS = [
    [Message(role="system", content="You verify claims."), Message(role="user", content="The Nile flows north.")],
    [Message(role="user", content="Bees can count.")],
    [Message(role="user", content="A much longer question, so that the other rows in the batch get left padding.")],
]
LABELS = ["SUPPORT", "REFUTE", "NOT ENOUGH INFO"]


# -- ScriptedLM --------------------------------------------------------------------------


def scripted() -> ScriptedLM:
    def respond(context: str) -> str:
        claim = context.rsplit("<user>", 1)[1].split("</user>", 1)[0]
        return f"<think>{claim}</think><answer>SUPPORT</answer> and more"

    return ScriptedLM(respond)


def test_scripted_complete_renders_the_chat_and_stops() -> None:
    lm = scripted()
    gens = lm.complete(CONVERSATIONS[:2], GenerationConfig(stop=("</answer>",)))
    assert [g.text for g in gens] == [
        "<think>The Nile flows north.</think><answer>SUPPORT</answer>",
        "<think>Bees can count.</think><answer>SUPPORT</answer>",
    ]
    assert all(g.finish_reason == "stop" and g.stop == "</answer>" for g in gens)
    short = lm.complete(CONVERSATIONS[:1], GenerationConfig(max_new_tokens=7))[0]
    assert short.text == "<think>" and short.finish_reason == "length"
    # Chat in means what generate sees is the chat template's prompt.
    assert lm.complete(CONVERSATIONS[:1], GenerationConfig())[0].token_ids == \
        lm.generate([lm.chat_prompt_ids(CONVERSATIONS[0])], GenerationConfig())[0].token_ids


def test_scripted_batched_equals_one_by_one() -> None:
    lm, cfg = scripted(), GenerationConfig(stop=("</think>",))
    assert lm.complete(CONVERSATIONS, cfg) == [lm.complete([c], cfg)[0] for c in CONVERSATIONS]
    assert lm.complete([], cfg) == []


def test_scripted_score_choices_is_the_token_score() -> None:
    lm = scripted()
    scores = lm.score_choices(CONVERSATIONS[0], LABELS)
    prompt = lm.chat_prompt_ids(CONVERSATIONS[0])
    assert scores == lm.score([prompt] * 3, [lm.encode(c) for c in LABELS])
    assert choice_probs(scores) == pytest.approx([1 / 3] * 3)
    assert lm.score_choices(CONVERSATIONS[0], []) == []


def test_backends_satisfy_the_protocol_and_misuse_is_refused() -> None:
    lm = scripted()
    assert isinstance(lm, LM) and isinstance(lm, TokenTextMixin)
    with pytest.raises(TypeError, match="list of conversations"):
        lm.complete(CONVERSATIONS[0], GenerationConfig())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not one string"):
        lm.score_choices(CONVERSATIONS[0], "SUPPORT")  # type: ignore[arg-type]


def test_cut_at_stop_trims_a_token_that_runs_past_the_stop() -> None:
    gen = Generation(token_ids=[1, 2], logprobs=[-0.5, -0.25], text="yes.\nno", finish_reason="stop", stop=".\n")
    assert cut_at_stop(gen) == Generation([1, 2], [-0.5, -0.25], "yes.\n", "stop", ".\n")
    same = Generation([1], [0.0], "yes.\n", "stop", ".\n")
    assert cut_at_stop(same) is same
    length = Generation([1], [0.0], "yes.\nno", "length")
    assert cut_at_stop(length) is length


def test_choice_probs() -> None:
    probs = choice_probs([-1.0, -2.0, -1000.0])
    assert sum(probs) == pytest.approx(1.0) and probs[0] > probs[1] > probs[2] >= 0
    assert probs[0] / probs[1] == pytest.approx(math.e)
    assert choice_probs([]) == []
    with pytest.raises(ValueError, match="probability 0"):
        choice_probs([-math.inf, -math.inf])


# -- HFLM on a tiny random model -----------------------------------------------------------


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from factrl.lm import load_lm
    from factrl.lm.tiny import build_tiny_model

    return load_lm(str(build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=0)),
                   max_batch_size=8)


def test_hf_complete_stops_at_a_stop_string(hf) -> None:
    sampled = GenerationConfig(max_new_tokens=24, temperature=1.0, seed=5)  # greedy just repeats "\n"
    free = hf.complete(CONVERSATIONS[:1], sampled)[0]
    assert free.text == hf.decode(free.token_ids)
    assert free.token_ids == hf.generate([hf.chat_prompt_ids(CONVERSATIONS[0])], sampled)[0].token_ids
    # A stop string taken from the middle of the free text: the stopped run samples the
    # same path (same seed) and its text ends right after the stop's first occurrence.
    letters = [k for k in range(4, len(free.text) - 2) if free.text[k : k + 2].isalpha()]
    assert letters, f"no letters to stop at in {free.text!r}"
    stop = free.text[letters[0] : letters[0] + 2]
    stopped = hf.complete(CONVERSATIONS[:1], replace(sampled, stop=(stop, "@@@")))[0]
    assert stopped.finish_reason == "stop" and stopped.stop == stop
    assert stopped.text == free.text[: free.text.find(stop) + len(stop)]
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)]


def test_hf_batched_equals_one_by_one(hf) -> None:
    # Greedy (a sampled row's seed depends on its place in the batch). The random model's
    # greedy text is newlines whatever the prompt, but their logprobs are the prompt's.
    cfg = GenerationConfig(max_new_tokens=12, temperature=0.0, stop=("\n\n\n\n\n",))
    batch = hf.complete(CONVERSATIONS, cfg)
    assert len(batch) == 3 and all(g.finish_reason == "stop" for g in batch)
    assert batch[0].logprobs != pytest.approx(batch[2].logprobs, abs=1e-4)
    for conv, gen in zip(CONVERSATIONS, batch):
        single = hf.complete([conv], cfg)[0]
        assert (single.token_ids, single.text, single.finish_reason) == (gen.token_ids, gen.text, gen.finish_reason)
        assert single.logprobs == pytest.approx(gen.logprobs, abs=1e-4)


def test_hf_score_choices_is_the_token_level_score(hf) -> None:
    scores = hf.score_choices(CONVERSATIONS[0], LABELS)
    prompt = hf.chat_prompt_ids(CONVERSATIONS[0])
    ids = [hf.encode(c) for c in LABELS]
    assert scores == pytest.approx(hf.score([prompt] * 3, ids), abs=1e-5)
    for s, choice_ids in zip(scores, ids):
        assert s == pytest.approx(sum(hf.token_logprobs(prompt, choice_ids)), abs=1e-4)
        assert s < 0
    probs = choice_probs(scores)
    assert sum(probs) == pytest.approx(1.0)
    assert probs.index(max(probs)) == scores.index(max(scores))
