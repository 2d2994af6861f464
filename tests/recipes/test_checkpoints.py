"""A recipe's view of a GRPO run: the last logged step, and a full model for a checkpoint
(a LoRA adapter merged into its base once)."""

import json

import pytest

from factrl.recipes.checkpoints import last_step, merged_model, saved_marks


def test_last_step_is_the_highest_step_logged(tmp_path) -> None:
    assert last_step(tmp_path) == 0  # nothing logged yet
    rows = [{"step": 1}, {"step": 3}, {"step": 2}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4')  # torn line
    assert last_step(tmp_path) == 3


def test_a_checkpoint_becomes_a_full_model_once(tmp_path) -> None:
    pytest.importorskip("peft")
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from factrl.lm.tiny import build_tiny_model

    base = build_tiny_model(tmp_path / "base", layers=1, hidden=32, heads=2)
    assert merged_model(base, base, tmp_path / "unused") == base  # a full model is itself
    with pytest.raises(FileNotFoundError, match="neither a model nor a LoRA adapter"):
        merged_model(tmp_path / "empty", base, tmp_path / "m")
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base)), LoraConfig(r=2, target_modules=["q_proj"]))
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.fill_(0.5)  # a non-zero update, so the merge shows
    peft.save_pretrained(tmp_path / "ckpt")
    dest = merged_model(tmp_path / "ckpt", base, tmp_path / "merged")
    assert dest == tmp_path / "merged" and (dest / "config.json").is_file() and (dest / "tokenizer_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(str(dest))
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, peft(ids).logits, atol=1e-5)
    stamp = (dest / "config.json").stat().st_mtime_ns
    assert merged_model(tmp_path / "ckpt", base, dest) == dest and (dest / "config.json").stat().st_mtime_ns == stamp


def test_saved_marks_name_only_the_checkpoints_a_run_saved(tmp_path) -> None:
    for m in (2, 5):
        (tmp_path / f"checkpoint-{m}").mkdir()
    assert saved_marks(tmp_path, 10, (0.25, 0.5, 1.0), done=10) == [2, 5]  # 25 % rounds to step 2
    assert saved_marks(tmp_path, 10, (0.3, 0.5), done=10) == [5]  # step 3 was never saved
    assert saved_marks(tmp_path, 10, (0.5,), done=4) == []  # the run stopped before step 5
