"""Shared prompts run once per step: found where they carry no loss, and SFT computes the
same loss and trains the same weights with them as with every row whole."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from factrl.train.shared_prompt import find_shared_prompts  # noqa: E402

PROMPT_A = [3 + (11 * j) % 200 for j in range(12)]
PROMPT_B = [7 + (13 * j) % 200 for j in range(9)]


def _example(prompt, rest, labelled_from):
    ids = prompt + rest
    labels = [-100] * len(ids)
    for j in range(labelled_from, len(ids)):
        labels[j] = ids[j]
    weights = [0.0 if x == -100 else 1.0 for x in labels]
    return {"input_ids": ids, "labels": labels, "weights": weights}


def _examples():
    out = []
    for i, n in enumerate((5, 9, 3, 7, 6)):  # the A prompt, then unlabelled claim tokens, then the answer
        rest = [210 + (5 * i + j) % 40 for j in range(n)]
        out.append(_example(PROMPT_A, rest, len(PROMPT_A) + 2))
    for i, n in enumerate((4, 8, 6)):
        rest = [250 + (3 * i + j) % 40 for j in range(n)]
        out.append(_example(PROMPT_B, rest, len(PROMPT_B)))
    out.append(_example([199, 198, 197, 196] + PROMPT_A, [260, 261, 262, 263], 6))  # shares nothing at its start
    return out


def test_prompts_are_found_and_cut_before_the_first_trained_prediction():
    ex = _examples()
    shared = find_shared_prompts(ex, min_tokens=4)
    assert len(shared.prompts) == 2
    a, b = shared.of[0], shared.of[5]
    assert shared.of[:5] == [a] * 5 and shared.of[5:8] == [b] * 3 and shared.of[8] == -1
    # A's rows agree on the prompt and their first two rest tokens differ: the common
    # prefix is the prompt itself; B's first answer token is labelled right after the
    # prompt, so its last position predicts a labelled token and is left to the rows
    assert shared.prompts[a] == PROMPT_A
    assert shared.prompts[b] == PROMPT_B[:-1]
    for e, x in enumerate(ex):  # no position inside a prompt predicts a labelled token
        n = shared.length(e)
        assert all(lab == -100 for lab in x["labels"][: n + 1])
    assert shared.shared_tokens == 5 * 12 + 3 * 8
    assert find_shared_prompts(ex, min_tokens=13).prompts == []  # shorter than asked: none
    assert find_shared_prompts(ex, min_tokens=0).prompts == []
    lone = [_example(PROMPT_A, [220, 221, 222], 13)]
    assert find_shared_prompts(lone, min_tokens=4).prompts == []  # one example shares with no one


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=3, hidden=32, heads=2)


@pytest.mark.parametrize("lora_layers", [1, None])
def test_sft_trains_the_same_weights_with_shared_prompts(tiny, tmp_path, lora_layers):
    """Two epochs (the frozen-prefix cache on for the second when blocks are frozen), rows
    of two prompts and one without a prompt in the same steps."""
    from transformers import AutoModelForCausalLM

    from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft

    ex = _examples()
    common = dict(learning_rate=1e-2, epochs=2.0, tokens_per_batch=60, lora_r=4, lora_alpha=8,
                  lora_target_modules=["q_proj", "v_proj", "down_proj"], lora_layers=lora_layers,
                  save_minutes=60.0, dtype="float32", warmup_steps=1)
    weights, logs, settings = [], [], []
    for tokens in (0, 4):
        out = tmp_path / f"t{tokens}"
        final = train_weighted_sft(ex, str(tiny), out, WeightedSFTSettings(**common, shared_prompt_tokens=tokens))
        weights.append(AutoModelForCausalLM.from_pretrained(str(final)).state_dict())
        logs.append([json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()])
        settings.append(json.loads((out / "settings.json").read_text()))
    assert settings[0]["shared_prompts"] == [] and sorted(settings[1]["shared_prompts"]) == [8, 12]
    assert any(r["rows"] > 2 for r in logs[1])  # steps hold several rows of a prompt
    if lora_layers:
        assert any(r["cached_prefix"] for r in logs[1])
    assert [r["loss"] for r in logs[0]] == pytest.approx([r["loss"] for r in logs[1]], abs=1e-4)
    moved = [k for k in weights[0] if not torch.equal(weights[0][k], AutoModelForCausalLM.from_pretrained(
        str(tiny)).state_dict()[k])]
    assert moved  # training changed the weights, so equal weights say something
    assert all(torch.allclose(weights[0][k], weights[1][k], atol=1e-5) for k in weights[0])
