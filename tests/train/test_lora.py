import pytest

pytest.importorskip("peft")

from factrl.train.lora import lora_config, top_layers


def test_top_layers_picks_the_highest_blocks(tmp_path):
    from factrl.lm.tiny import build_tiny_model

    tiny = str(build_tiny_model(tmp_path / "tiny", layers=4, hidden=32, heads=2))
    assert top_layers(tiny, None) is None
    assert top_layers(tiny, 1) == [3]
    assert top_layers(tiny, 3) == [1, 2, 3]
    assert top_layers(tiny, 9) == [0, 1, 2, 3]  # more than the model has: every block
    with pytest.raises(ValueError, match="positive"):
        top_layers(tiny, 0)


def test_adapters_only_in_the_top_blocks_and_no_gradient_below(tmp_path):
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from factrl.lm.tiny import build_tiny_model

    tiny = str(build_tiny_model(tmp_path / "tiny", layers=4, hidden=32, heads=2))
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny),
                           lora_config(tiny, r=4, alpha=8, targets=["q_proj", "v_proj"], layers=2))
    adapted = {name.split(".layers.")[1].split(".")[0] for name, p in model.named_parameters()
               if p.requires_grad and "lora_" in name}
    assert adapted == {"2", "3"}
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    ids = torch.randint(3, 50, (2, 7))
    model(input_ids=ids, labels=ids).loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
    every = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny),
                           lora_config(tiny, r=4, alpha=8, targets=["q_proj", "v_proj"]))
    assert {n.split(".layers.")[1].split(".")[0] for n, p in every.named_parameters() if p.requires_grad} == {
        "0", "1", "2", "3"}
