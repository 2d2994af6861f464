import pytest

from factrl.train.config import load_run_config, parse_overrides


def test_parse_overrides_reads_json_values_and_keeps_text():
    got = parse_overrides(["grpo.max_steps=10", "grpo.beta=0.0", "model.lora=true", "model.id=smollm2",
                           "env.reward.use_validity=false", "data.data_dir=a=b"])
    assert got == {"grpo.max_steps": 10, "grpo.beta": 0.0, "model.lora": True, "model.id": "smollm2",
                   "env.reward.use_validity": False, "data.data_dir": "a=b"}
    with pytest.raises(ValueError, match="key=value"):
        parse_overrides(["grpo.max_steps"])


def test_overrides_reach_nested_tables_of_a_preset():
    cfg = load_run_config("veri_r1_offline_cpu", parse_overrides(["env.reward.use_validity=false"]))
    assert cfg.env.reward == {"empty_iou": 0.0, "use_validity": False}
    assert cfg.grpo.gradient_checkpointing is False
    assert load_run_config("veri_r1_offline").grpo.gradient_checkpointing is True
