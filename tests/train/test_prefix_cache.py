"""The frozen-prefix cache gives the trained blocks the states a full forward gives them,
in any batch, within its budget; SFT over two epochs trains the same weights with it."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from factrl.train.prefix_cache import FrozenPrefixCache, frozen_blocks  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=3, hidden=32, heads=2)


def _peft(path, layers):
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from factrl.train.lora import lora_config

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model = get_peft_model(base, lora_config(str(path), r=4, alpha=8, targets=["q_proj", "v_proj"], layers=layers))
    for name, p in model.named_parameters():  # a LoRA B of zeros would hide a wrong input
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    return model, model.base_model.model


def _batch(seqs):
    width = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.tensor(s)
        attn[b, : len(s)] = 1
    return ids, attn


SEQS = [[5 + (7 * i + j) % 300 for j in range(n)] for i, n in enumerate((9, 4, 12, 7))]


def test_cached_states_give_the_full_forward_in_another_batch(tiny):
    model, inner = _peft(tiny, layers=1)
    assert frozen_blocks(inner) == 2
    cache = FrozenPrefixCache(inner, budget_bytes=1 << 20)
    ids, attn = _batch(SEQS)
    with cache.capture([0, 1, 2, 3], [len(s) for s in SEQS]):
        inner.model(input_ids=ids, attention_mask=attn, use_cache=False)
    assert cache.covers([0, 1, 2, 3]) and not cache.covers([0, 4])
    rows = [2, 1]  # another batch: other rows, other width
    ids2, attn2 = _batch([SEQS[r] for r in rows])
    full = inner.model(input_ids=ids2, attention_mask=attn2, use_cache=False).last_hidden_state
    fast = cache.forward(rows, attn2)
    for b, r in enumerate(rows):
        n = len(SEQS[r])
        assert torch.allclose(fast[b, :n], full[b, :n], atol=1e-5)
    assert len(inner.model.layers) == 3  # the blocks are put back
    fast[0, : len(SEQS[2])].sum().backward()
    trained = [p.grad for n, p in model.named_parameters() if p.requires_grad]
    assert trained and all(g is not None and g.abs().sum() > 0 for g in trained)


def test_the_budget_and_the_settings_that_turn_it_off(tiny):
    _, inner = _peft(tiny, layers=1)
    ids, attn = _batch(SEQS)
    one_row = len(SEQS[0]) * 32 * 4
    cache = FrozenPrefixCache(inner, budget_bytes=one_row)
    with cache.capture([0, 1, 2, 3], [len(s) for s in SEQS]):
        inner.model(input_ids=ids, attention_mask=attn, use_cache=False)
    assert cache.covers([0]) and not cache.covers([1]) and cache.used <= one_row
    _, every = _peft(tiny, layers=None)  # LoRA in every block: nothing is frozen
    assert frozen_blocks(every) == 0 and not FrozenPrefixCache(every, budget_bytes=1 << 20).enabled
    _, inner2 = _peft(tiny, layers=1)
    inner2.model.embed_tokens.weight.requires_grad_(True)  # trained embeddings change the prefix
    assert frozen_blocks(inner2) == 0


def test_two_epoch_sft_trains_the_same_weights_with_the_cache(tiny, tmp_path):
    from transformers import AutoModelForCausalLM

    from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft

    examples = [{"input_ids": s, "labels": [-100] * 2 + s[2:], "weights": [0.0] * 2 + [1.0] * (len(s) - 2)}
                for s in SEQS]
    common = dict(learning_rate=1e-2, epochs=2.0, tokens_per_batch=20, lora_r=4, lora_alpha=8,
                  lora_target_modules=["q_proj", "v_proj"], lora_layers=1, save_minutes=60.0, dtype="float32")
    weights, logs = [], []
    for gb in (0.0, 1.0):
        out = tmp_path / f"gb{gb}"
        final = train_weighted_sft(examples, str(tiny), out, WeightedSFTSettings(**common, prefix_cache_gb=gb))
        weights.append(AutoModelForCausalLM.from_pretrained(str(final)).state_dict())
        logs.append([json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()])
    assert not any(r["cached_prefix"] for r in logs[0])
    assert any(r["cached_prefix"] for r in logs[1]) and not logs[1][0]["cached_prefix"]
    assert [r["loss"] for r in logs[0]] == pytest.approx([r["loss"] for r in logs[1]], abs=1e-4)
    assert all(torch.allclose(weights[0][k], weights[1][k], atol=1e-5) for k in weights[0])
