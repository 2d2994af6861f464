"""The ``rar`` agent and the prompt-set format it reads."""

import json

import pytest

from factrl.datasets import DatasetFormatError, load_dataset, prepare_splits
from factrl.datasets.prepare import DataSettings
from factrl.envs import EnvSpec, build
from factrl.envs.rar import SHORT_FORM_INSTRUCTION
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import RolloutConfig, run_episodes

from _support import REPO

FIXTURE = REPO / "tests" / "fixtures" / "rar_prompts.jsonl"


def claims():
    return load_dataset("rar_prompts", FIXTURE, "train").claims


def test_prompt_set_loads_kinds_answers_and_documents():
    cs = {c.id: c for c in claims()}
    assert list(cs) == ["p1", "p2", "q1", "q2", "q3"]
    assert cs["p1"].text == "Tell me about the Nile." and cs["p1"].label is None
    assert cs["p1"].meta["kind"] == "long" and cs["p1"].meta["answers"] == []
    assert [d["id"] for d in cs["p1"].meta["documents"]] == ["nile", "paris"]
    assert cs["q1"].meta["kind"] == "short" and cs["q1"].meta["answers"] == ["Mediterranean Sea", "the Mediterranean"]


@pytest.mark.parametrize("row, why", [
    ({"id": "x", "prompt": "p", "kind": "medium"}, "field 'kind' must be one of long, short"),
    ({"id": "x", "prompt": "p", "kind": "long", "answers": ["a"]}, "'answers' are for short-form prompts"),
    ({"id": "x", "prompt": "p", "kind": "short", "answers": [""]}, "non-empty strings"),
    ({"id": "x", "prompt": "p", "documents": [{"id": "d"}]}, "document 0 needs 'id' and a string 'text'"),
    ({"id": "x", "prompt": "p", "documents": "text"}, "must be a list"),
    ({"id": "x"}, "prompt"),
])
def test_bad_rows_name_file_line_and_reason(tmp_path, row, why):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "ok", "prompt": "fine"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DatasetFormatError, match=why) as exc:
        load_dataset("rar_prompts", path, "train")
    assert ":2:" in str(exc.value)
    skipped = load_dataset("rar_prompts", path, "train", on_error="skip")
    assert [c.id for c in skipped.claims] == ["ok"] and len(skipped.errors) == 1


def test_training_keeps_unlabelled_prompts(tmp_path):
    train, held = prepare_splits(DataSettings(dataset="rar_prompts", data_dir=str(FIXTURE), held_out_fraction=0.4),
                                 tmp_path)
    assert sorted(c.id for c in train + held) == ["p1", "p2", "q1", "q2", "q3"] and len(held) == 2


def run(responses, cs=None, **params):
    cs = cs or claims()
    it = iter(responses)
    return run_episodes(lambda: build(EnvSpec(name="rar", params=params)), cs, ScriptedLM(lambda ctx: next(it)),
                        RolloutConfig(temperature=0), score=False)


def test_one_turn_answer_with_short_form_abstention_instruction():
    trajs = run(["The Nile flows north.", "Paris is in France.", "The Mediterranean Sea.", "I don't know.",
                 "<think>hmm</think>The Thames."])
    long_, _, q1, q2, q3 = trajs
    assert long_.prompt[0].content == "Tell me about the Nile."
    assert q1.prompt[0].content == f"Into which sea does the Nile flow?\n\n{SHORT_FORM_INSTRUCTION}"
    assert 'answer exactly "I don\'t know"' in SHORT_FORM_INSTRUCTION
    assert long_.meta["response"] == "The Nile flows north." and long_.meta["kind"] == "long"
    assert "abstained" not in long_.meta
    assert (q1.meta["abstained"], q1.meta["correct"]) == (False, True)
    assert (q2.meta["abstained"], q2.meta["correct"]) == (True, False)
    assert (q3.meta["response"], q3.meta["abstained"], q3.meta["correct"]) == ("The Thames.", False, False)
    assert all(t.verdict.answered and t.verdict.format_ok and t.verdict.label is None for t in trajs)
    assert [t.source for t in q1.turns] == ["model"] and len(trajs[0].turns) == 1


def test_short_form_without_answers_has_no_correctness_and_instruction_can_be_changed():
    c = claims()[2].model_copy(update={"meta": {"kind": "short", "answers": [], "documents": []}})
    (t,) = run(["Mediterranean"], [c], short_form_instruction="")
    assert t.prompt[0].content == "Into which sea does the Nile flow?"
    assert t.meta["correct"] is None and t.meta["abstained"] is False


def test_empty_prompt_fails_the_episode_and_unknown_params_are_refused():
    c = claims()[0].model_copy(update={"text": "  "})
    (t,) = run(["x"], [c])
    assert t.error is not None and "empty text" in t.error
    with pytest.raises(ValueError, match="environment 'rar'"):
        build(EnvSpec(name="rar", params={"max_searches": 2}))
