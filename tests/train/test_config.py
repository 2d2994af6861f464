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
    cfg = load_run_config("veri_r1_offline_cpu", parse_overrides(["reward.params.use_validity=true"]))
    assert cfg.reward.params == {"empty_iou": 0.0, "use_validity": True}  # the other key is kept
    assert cfg.grpo.gradient_checkpointing is False
    assert load_run_config("veri_r1_offline").grpo.gradient_checkpointing is True


def test_every_preset_loads_and_maps_to_trl_batches():
    from factrl.train.config import list_presets, trl_batch_args

    names = list_presets()
    assert {"veri_r1_online", "veri_r1_offline", "veri_r1_online_cpu", "veri_r1_offline_cpu"} <= set(names)
    for name in names:
        cfg = load_run_config(name)
        assert cfg.preset.name == name and cfg.preset.paper
        assert cfg.preset.scaled_down is name.endswith("_cpu")
        batches = trl_batch_args(cfg.grpo)
        assert batches["gradient_accumulation_steps"] >= 1
