"""Frozen weights cast once under CPU autocast (factrl.lm.autocast_weights): the same
generations bit for bit, the float32 weights back afterwards, LoRA's weights left to
autocast, and a changed weight cast again."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from factrl.lm import GenerationConfig  # noqa: E402
from factrl.lm.autocast_weights import cast_frozen_weights  # noqa: E402
from factrl.lm.hf import HFLM  # noqa: E402
from factrl.lm.tiny import build_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def lora_lm(tmp_path_factory):
    """A tiny float32 model with LoRA in its top block, as a trainer holds it."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from factrl.train.lora import lora_config

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=0)
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    model = get_peft_model(base, lora_config(str(path), r=4, alpha=8, targets=["q_proj", "v_proj", "up_proj"], layers=1))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.3)
    return HFLM(model, AutoTokenizer.from_pretrained(str(path)), max_batch_size=4, engine="off")


def _frozen_linear(model):
    out = []
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and not m.weight.requires_grad:
            out.append(m.weight)
    return out


def _generate(lm, prompts, cast):
    cfg = GenerationConfig(max_new_tokens=12, temperature=1.0, seed=3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if cast:
            return lm.generate(prompts, cfg)
        import factrl.lm.hf as hf

        real = hf.cast_frozen_weights
        hf.cast_frozen_weights = lambda *a, **k: cast_frozen_weights(torch.nn.Identity(), torch.device("cpu"))
        try:
            return lm.generate(prompts, cfg)
        finally:
            hf.cast_frozen_weights = real


def test_the_same_generations_and_the_weights_back(lora_lm):
    prompts = [lora_lm.encode("Claim: the Nile flows north. " * 4), lora_lm.encode("x y " * 9)]
    before = [(w.dtype, w.data_ptr()) for w in _frozen_linear(lora_lm.model)]
    plain = _generate(lora_lm, prompts, cast=False)
    cast = _generate(lora_lm, prompts, cast=True)
    for a, b in zip(plain, cast):
        assert a.token_ids == b.token_ids and a.logprobs == b.logprobs  # bit for bit
    assert [(w.dtype, w.data_ptr()) for w in _frozen_linear(lora_lm.model)] == before


def test_which_weights_are_cast_and_when_again(lora_lm):
    model = lora_lm.model
    frozen = _frozen_linear(model)
    tied = model.get_output_embeddings().weight
    assert tied is model.get_input_embeddings().weight
    expected = [w for w in frozen if w is not tied and w.dtype == torch.float32]
    store: dict = {}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with cast_frozen_weights(model, torch.device("cpu"), store) as n:
            assert n == len(expected) + 1 == len(store) > 1
            assert all(w.dtype == torch.bfloat16 for w in expected)
            # the output layer has the cast as its own weight; the lookup keeps float32
            assert model.get_output_embeddings().weight.dtype == torch.bfloat16
            assert model.get_input_embeddings().weight is tied and tied.dtype == torch.float32
            trained = [p for name, p in model.named_parameters() if "lora_" in name]
            assert trained and all(p.dtype == torch.float32 for p in trained)
        kept = {k: v[2] for k, v in store.items()}
        with cast_frozen_weights(model, torch.device("cpu"), store):
            pass
        assert all(store[k][2] is kept[k] for k in kept)  # cast once for the store's life
        w = expected[0]
        with torch.no_grad():
            w.mul_(1.5)  # a changed weight (its version moves) is cast again
        try:
            with cast_frozen_weights(model, torch.device("cpu"), store):
                assert torch.equal(w.data, (w.data.float()).to(torch.bfloat16))
            assert store[id(w)][2] is not kept[id(w)]
        finally:
            with torch.no_grad():
                w.div_(1.5)
    assert all(x.dtype == torch.float32 for x in frozen)
    assert model.get_output_embeddings().weight is tied  # tied again
    with cast_frozen_weights(model, torch.device("cpu"), store) as n:  # no autocast: nothing
        assert n == 0


def test_an_error_inside_puts_the_weights_back(lora_lm):
    model = lora_lm.model
    with pytest.raises(RuntimeError, match="boom"):
        with torch.autocast("cpu", dtype=torch.bfloat16), cast_frozen_weights(model, torch.device("cpu")):
            raise RuntimeError("boom")
    assert all(w.dtype == torch.float32 for w in _frozen_linear(model))
