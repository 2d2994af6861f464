import math

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
    assert cfg.reward.params == {"convention": "paper", "empty_iou": 0.0, "use_validity": True}  # others kept
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


def test_veri_r1_presets_name_their_reward_convention():
    from importlib.resources import files

    from factrl.rewards import CONVENTIONS, RewardSpec, build_reward
    from factrl.train.config import list_presets

    names = [n for n in list_presets() if n.startswith("veri_r1")]
    assert {"veri_r1_online", "veri_r1_offline", "veri_r1_online_cpu", "veri_r1_offline_cpu"} <= set(names)
    for name in names:
        cfg = load_run_config(name)
        convention = cfg.reward.params.get("convention")
        assert convention in CONVENTIONS, name
        header = (files("factrl.presets") / f"{name}.toml").read_text().split("output_dir", 1)[0]
        assert f'Reward convention "{convention}"' in header, name
        build_reward(RewardSpec(name=cfg.reward.name or "veri_r1", params=cfg.reward.params))  # valid settings


PAPER_PRESETS = ("veri_r1_online", "veri_r1_offline")
CPU_PRESETS = ("veri_r1_online_cpu", "veri_r1_offline_cpu")


def test_online_paper_preset_budget_is_four_turns_and_three_observations():
    r = load_run_config("veri_r1_online").rollout
    assert r.max_new_tokens == 512
    assert r.max_total_tokens == 4 * 512 + 3 * 768 == 4352  # Veri-R1 App. B: response 512, observation 768
    offline = load_run_config("veri_r1_offline").rollout
    assert offline.max_new_tokens == offline.max_total_tokens == 512  # one answer turn, no observations
    for name in CPU_PRESETS:
        r = load_run_config(name).rollout
        assert r.max_total_tokens >= r.max_new_tokens  # at least one full model turn fits


def test_paper_presets_warm_up_then_constant_lr_with_token_level_loss():
    for name in PAPER_PRESETS:
        cfg = load_run_config(name)
        g = cfg.grpo
        assert (g.learning_rate, g.beta, g.num_generations) == (1e-6, 0.001, 3)
        assert (g.prompts_per_generation, g.prompts_per_update) == (256, 64)
        assert g.warmup_ratio == 0.285 and g.warmup_steps == 0
        assert g.lr_scheduler_type == "constant_with_warmup"
        assert g.loss_type == "dapo"  # TRL's token mean over the update = verl's loss_agg_mode token-mean
        assert cfg.rollout.temperature == 0.8
        assert "SciFact" in cfg.preset.notes and "vLLM" in cfg.preset.notes  # departures are listed
    for name in CPU_PRESETS:  # short runs: the paper's constant rate, without the warm-up
        g = load_run_config(name).grpo
        assert g.lr_scheduler_type == "constant" and g.warmup_ratio == 0.0 and g.warmup_steps == 0
        assert "warm-up" in load_run_config(name).preset.notes


def test_grpo_args_refuses_two_warm_ups_and_ratios_outside_0_1():
    from factrl.train.config import grpo_args

    with pytest.raises(ValueError, match="not both"):
        grpo_args(load_run_config("veri_r1_online", {"grpo.warmup_steps": 10}))
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        grpo_args(load_run_config("veri_r1_online", {"grpo.warmup_ratio": 1.5}))
    args = grpo_args(load_run_config("veri_r1_online", {"grpo.warmup_ratio": 0.0, "grpo.warmup_steps": 7}))
    assert args["warmup_steps"] == 7


def test_preset_settings_reach_trl_grpo_config(tmp_path):
    torch = pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    from transformers import get_scheduler
    from transformers.trainer_utils import SchedulerType

    from factrl.train.config import grpo_args, list_presets

    def build(name):  # as train_grpo does, less the reward weights
        cfg = load_run_config(name, {"output_dir": str(tmp_path / name)})
        return cfg, trl.GRPOConfig(**grpo_args(cfg))

    for name in PAPER_PRESETS:
        cfg, args = build(name)
        assert args.lr_scheduler_type == SchedulerType.CONSTANT_WITH_WARMUP
        assert args.get_warmup_steps(args.max_steps) == math.ceil(0.285 * cfg.grpo.max_steps) == 29
        assert args.loss_type == "dapo"
        assert (args.learning_rate, args.beta, args.num_generations, args.temperature) == (1e-6, 0.001, 3, 0.8)
        assert args.max_completion_length == cfg.rollout.max_total_tokens + 1
        # 256 prompts x 3 rollouts per generation, 64 x 3 per optimiser update
        assert args.generation_batch_size == 256 * 3
        assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 64 * 3
        # the schedule TRL's Trainer builds from these arguments: linear ramp, then constant
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=args.learning_rate)
        sched = get_scheduler(args.lr_scheduler_type, optimizer=opt,
                              num_warmup_steps=args.get_warmup_steps(args.max_steps),
                              num_training_steps=args.max_steps)
        lrs = []
        for _ in range(args.max_steps):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        assert lrs[0] == 0.0 and 0 < lrs[14] < 1e-6
        assert all(a < b for a, b in zip(lrs[:29], lrs[1:29]))
        assert lrs[29:] == pytest.approx([1e-6] * (args.max_steps - 29))
    for name in sorted(set(list_presets()) - set(PAPER_PRESETS)):
        cfg, args = build(name)
        assert args.lr_scheduler_type == SchedulerType(cfg.grpo.lr_scheduler_type)
        assert args.get_warmup_steps(args.max_steps) == 0
        assert args.loss_type == cfg.grpo.loss_type


def test_label_balanced_grpo_keeps_an_interleaved_order_that_trl_does_not_reshuffle(tmp_path):
    pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    from trl.trainer.utils import RepeatSampler

    from factrl.labels import Label
    from factrl.train.config import grpo_args
    from factrl.train.grpo import training_order
    from factrl.types import Claim

    # a training split biased towards SUPPORT, as SciFact's is
    labels = [Label.SUPPORT] * 8 + [Label.REFUTE] * 4 + [Label.NEI] * 4
    claims = [Claim(id=str(i), text=f"claim {i}", label=lab) for i, lab in enumerate(labels)]
    cfg = load_run_config("veri_r1_offline_cpu", {"output_dir": str(tmp_path), "grpo.label_balanced": True})
    args = trl.GRPOConfig(**grpo_args(cfg))
    assert args.shuffle_dataset is False
    order = training_order(claims, cfg)
    assert sorted(c.id for c in order) == sorted(c.id for c in claims)  # nothing lost or repeated
    # the sampler TRL builds: each generation's prompts, in dataset order
    g, n = cfg.grpo.num_generations, cfg.grpo.prompts_per_generation
    idx = list(RepeatSampler(order, mini_repeat_count=g, batch_size=n, shuffle=args.shuffle_dataset, seed=0))
    first = [order[i].label for i in idx[: g * n : g]]
    # every label in the first update (4 prompts), though 8 of 16 claims are SUPPORT
    assert set(first) == {Label.SUPPORT, Label.REFUTE, Label.NEI}
    # grpo.order_seed seeds the order alone: seed 1 with order 0 is seed 0's order
    def order_of(**grpo):
        c = load_run_config("veri_r1_offline_cpu", {"output_dir": str(tmp_path), "grpo.label_balanced": True,
                                                    **{f"grpo.{k}": v for k, v in grpo.items()}})
        return [x.id for x in training_order(claims, c)]

    assert order_of(seed=1, order_seed=0) == order_of(seed=0) != order_of(seed=1)
    # the default: as given, and TRL shuffles
    plain = load_run_config("veri_r1_offline_cpu", {"output_dir": str(tmp_path)})
    assert training_order(claims, plain) == claims
    assert grpo_args(plain)["shuffle_dataset"] is True


def _precision(cfg):
    from factrl.train.config import grpo_args

    return {k: v for k, v in grpo_args(cfg).items() if k in ("use_cpu", "bf16", "fp16")}


def test_model_device_and_dtype_set_trls_device_and_mixed_precision(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from _support import pretend_cuda

    from factrl.train.config import training_precision

    plain = {"output_dir": str(tmp_path), "grpo.bf16": False}
    cfg = load_run_config("veri_r1_online", {**plain, "model.device": "cpu"})
    assert (cfg.model.device, cfg.model.dtype) == ("cpu", "auto")
    assert _precision(cfg) == {"use_cpu": True, "bf16": False, "fp16": False}
    assert _precision(load_run_config("veri_r1_online", {**plain, "model.device": "cpu", "model.dtype": "bf16"})) == {
        "use_cpu": True, "bf16": True, "fp16": False}
    # the older grpo.bf16 = true: bfloat16 unless another dtype is named
    assert _precision(load_run_config("veri_r1_offline_cpu", {"model.device": "cpu"}))["bf16"] is True
    with pytest.raises(ValueError, match="grpo.bf16 = true asks for bfloat16"):
        _precision(load_run_config("veri_r1_offline_cpu", {"model.dtype": "float32"}))
    with pytest.raises(ValueError, match="float16 mixed precision trains on a GPU only"):
        training_precision("cpu", "float16")
    pretend_cuda(monkeypatch, (8, 7))
    auto = load_run_config("veri_r1_online", plain)
    assert _precision(auto) == {"use_cpu": False, "bf16": True, "fp16": False}  # auto: the GPU, in bf16
    assert training_precision("cuda", "fp16") == ("cuda:0", "float16")
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES=1"):
        training_precision("cuda:1", "auto")
    assert training_precision("cuda:1", "auto", trainer="plain") == ("cuda:1", "float32")  # no native bf16 there


def test_label_mix_deals_labels_in_its_proportions_and_refuses_bad_settings(tmp_path):
    from factrl.labels import Label
    from factrl.train.grpo import training_order
    from factrl.types import Claim

    labels = [Label.SUPPORT] * 6 + [Label.REFUTE] * 6 + [Label.NEI] * 6
    claims = [Claim(id=str(i), text=f"claim {i}", label=lab) for i, lab in enumerate(labels)]
    base = {"output_dir": str(tmp_path), "grpo.label_balanced": True}
    cfg = load_run_config("veri_r1_offline_cpu", {**base, "grpo.label_mix.NEI": 2})
    assert cfg.grpo.label_mix == {"NOT ENOUGH INFO": 2}  # any spelling, stored canonically
    order = training_order(claims, cfg)
    assert sorted(c.id for c in order) == sorted(c.id for c in claims)  # nothing lost or repeated
    # each round: 2 NOT ENOUGH INFO, 1 REFUTE, 1 SUPPORT; after three rounds NEI runs out
    first = [c.label for c in order[:12]]
    assert first.count(Label.NEI) == 6 and first.count(Label.SUPPORT) == 3 and first.count(Label.REFUTE) == 3
    assert [c.label for c in order[:4]].count(Label.NEI) == 2
    with pytest.raises(ValueError, match="unknown label"):
        load_run_config("veri_r1_offline_cpu", {**base, "grpo.label_mix.MAYBE": 2})
    with pytest.raises(ValueError, match="whole number"):
        load_run_config("veri_r1_offline_cpu", {**base, "grpo.label_mix.NEI": 0.5})
    unbalanced = load_run_config("veri_r1_offline_cpu", {"output_dir": str(tmp_path), "grpo.label_mix.NEI": 2})
    with pytest.raises(ValueError, match="label_balanced"):
        training_order(claims, unbalanced)
