"""GRPO on TRL with a factrl environment, on a tiny model built from SmolLM2's config."""

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from factrl.envs.base import ENVS, EpisodeResult, StepResult  # noqa: E402
from factrl.rewards.base import REWARDS  # noqa: E402
from factrl.train.callbacks import curve_series, plot_curves, read_metrics  # noqa: E402
from factrl.train.config import GRPORunConfig, load_run_config  # noqa: E402
from factrl.train.grpo import train_grpo  # noqa: E402
from factrl.types import Message, Verdict  # noqa: E402

from _support import REPO, VowelReward  # noqa: E402


class VowelEnv:
    """One-turn env whose reward (share of vowels) a random tiny model can vary."""

    name = "vowel_test"
    stop = ("</answer>",)
    max_turns = 1
    default_reward = "vowel_test"

    def __init__(self, deps=None):
        self.text = ""

    def reset(self, claim):
        return [Message(role="user", content=f"Talk about: {claim.text}")]

    autocast_seen: list = []  # whether generation ran under CPU bf16 autocast, per step

    def step(self, text):
        self.text = text
        VowelEnv.autocast_seen.append(torch.is_autocast_enabled("cpu") and
                                      torch.get_autocast_dtype("cpu") == torch.bfloat16)
        return StepResult(observation=None, done=True)

    def result(self):
        return EpisodeResult(verdict=self.parse_verdict(self.text))

    def parse_verdict(self, text):
        return Verdict()


if "vowel_test" not in ENVS:
    ENVS.register("vowel_test")(VowelEnv)
    REWARDS.register("vowel_test")(VowelReward("vowel_test"))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4)


def _config(tiny_model, out, **grpo):
    cfg = load_run_config(
        REPO / "tests" / "fixtures" / "tiny_grpo.toml",
        {"model.id": str(tiny_model), "output_dir": str(out),
         "data.data_dir": str(REPO / "tests" / "fixtures" / "tiny_claims.jsonl"),
         **{f"grpo.{k}": v for k, v in grpo.items()}},
    )
    assert isinstance(cfg, GRPORunConfig)
    return cfg


def _weights(path):
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(str(path))
    return {k: v.clone() for k, v in m.state_dict().items()}


def test_two_grpo_steps_change_weights_with_finite_loss(tiny_model, tmp_path):
    before = _weights(tiny_model)
    VowelEnv.autocast_seen.clear()
    final = train_grpo(_config(tiny_model, tmp_path, max_steps=2))
    assert VowelEnv.autocast_seen and not any(VowelEnv.autocast_seen)  # fp32 unless bf16 is asked for
    after = _weights(final)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) >= len(before) // 2, changed
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(math.isfinite(r["loss"]) for r in rows)
    assert all("rewards/reward_total/mean" in r and "kl" in r for r in rows)
    assert (tmp_path / "held_out_ids.txt").read_text().strip()
    assert (tmp_path / "curves.png").stat().st_size > 1000
    recorded = json.loads((tmp_path / "config.json").read_text())
    assert recorded["grpo"]["beta"] == 0.001
    # where it trained: model.device/model.dtype as resolved on this machine (auto: the CPU, float32)
    assert (recorded["model"]["device"], recorded["model"]["dtype"]) == ("cpu", "float32")
    assert recorded["runtime"] == {"device": "cpu"}


def test_resume_continues_the_same_run(tiny_model, tmp_path):
    # also the CPU presets' setting: no activation recomputation
    nockpt = {"gradient_checkpointing": False}
    train_grpo(_config(tiny_model, tmp_path, max_steps=2, **nockpt))
    with pytest.raises(FileExistsError):
        train_grpo(_config(tiny_model, tmp_path, max_steps=3, **nockpt))
    train_grpo(_config(tiny_model, tmp_path, max_steps=3, **nockpt), resume=True)
    assert json.loads((tmp_path / "config.json").read_text())["grpo"]["gradient_checkpointing"] is False
    trl_args = torch.load(tmp_path / "checkpoint-3" / "training_args.bin", weights_only=False)
    assert trl_args.gradient_checkpointing is False
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl") if "loss" in r]
    assert steps == [1, 2, 3]
    state = json.loads((tmp_path / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    assert [h["step"] for h in state["log_history"] if "loss" in h] == [1, 2, 3]


def test_bf16_mixed_precision_trains_and_generates_under_autocast(tiny_model, tmp_path):
    before = _weights(tiny_model)
    VowelEnv.autocast_seen.clear()
    final = train_grpo(_config(tiny_model, tmp_path, max_steps=1, bf16=True, gradient_checkpointing=False))
    assert VowelEnv.autocast_seen and all(VowelEnv.autocast_seen)
    trl_args = torch.load(tmp_path / "checkpoint-1" / "training_args.bin", weights_only=False)
    assert trl_args.bf16 is True and trl_args.use_cpu is True
    assert json.loads((tmp_path / "config.json").read_text())["model"]["dtype"] == "bfloat16"
    after = _weights(final)
    assert all(v.dtype == torch.float32 for v in after.values())  # fp32 master weights
    assert any(not torch.equal(before[k], after[k]) for k in before)
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "loss" in r]
    assert len(rows) == 1 and math.isfinite(rows[0]["loss"])


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_curves_plot_evidence_cover_and_verification_and_read_older_metrics(tmp_path):
    steps = list(range(1, 9))
    cover = [0.1, 0.15, 0.2, 0.3, 0.35, 0.5, 0.55, 0.6]
    verified = [0.05, 0.1, 0.1, 0.2, 0.25, 0.3, 0.4, 0.45]
    rows = [{"step": s, "loss": 0.01, "reward": 1.0 + s / 10, "rewards/reward_total/mean": 1.0 + s / 10,
             "rewards/reward_format/mean": 0.9, "rewards/label_correct/mean": 0.4,
             "rewards/evidence_cover/mean": c, "rewards/verified/mean": v}
            for s, c, v in zip(steps, cover, verified)]
    rows.append({"step": 8, "train_runtime": 12.5})  # TRL's end-of-training log: no curve point
    new = tmp_path / "metrics.jsonl"
    new.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 9, "rew')  # torn last line

    series = curve_series(read_metrics(new))
    assert series["Verification (rollouts)"] == {"evidence cover rate": (steps, cover),
                                                "verification accuracy": (steps, verified)}
    assert series["Rollout label accuracy"] == {"label accuracy": (steps, [0.4] * 8)}
    assert set(series["Rollout rewards"]) == {"total", "format"}
    png = plot_curves(new, tmp_path / "curves.png")
    assert png == tmp_path / "curves.png" and png.stat().st_size > 1000
    width3, height = _png_size(png)

    # an older metrics file, without the two columns: no third panel, still a figure
    old = tmp_path / "old_metrics.jsonl"
    old.write_text("".join(json.dumps({k: v for k, v in r.items() if "evidence_cover" not in k and "verified" not in k})
                           + "\n" for r in rows))
    assert "Verification (rollouts)" not in curve_series(read_metrics(old))
    old_png = plot_curves(old, tmp_path / "old_curves.png")
    assert old_png is not None and old_png.stat().st_size > 1000
    width2, height2 = _png_size(old_png)
    assert height2 == height and width3 == width2 * 3 // 2  # one more panel of the same size
    # prompts without labels (Binary RAR): no empty label-accuracy panel, the rewards alone
    plain = tmp_path / "plain_metrics.jsonl"
    plain.write_text("".join(json.dumps({k: v for k, v in r.items() if "label_correct" not in k and "evidence_cover"
                                         not in k and "verified" not in k}) + "\n" for r in rows))
    width1, _ = _png_size(plot_curves(plain, tmp_path / "plain_curves.png"))
    assert width1 * 2 == width2
    assert plot_curves(tmp_path / "missing.jsonl", tmp_path / "none.png") is None


def test_warm_up_schedule_and_loss_type_reach_the_trainer(tiny_model, tmp_path):
    # a warm-up of half of 2 updates: the first update runs at learning rate 0, the second at the peak
    before = _weights(tiny_model)
    final = train_grpo(_config(tiny_model, tmp_path, max_steps=2, lr_scheduler_type="constant_with_warmup",
                               warmup_ratio=0.5, loss_type="dapo", gradient_checkpointing=False))
    trl_args = torch.load(tmp_path / "checkpoint-2" / "training_args.bin", weights_only=False)
    assert trl_args.lr_scheduler_type.value == "constant_with_warmup"
    assert trl_args.warmup_steps == 0.5 and trl_args.get_warmup_steps(2) == 1
    assert trl_args.loss_type == "dapo"
    after_warm_up = _weights(tmp_path / "checkpoint-1")
    assert all(torch.equal(before[k], after_warm_up[k]) for k in before)
    after = _weights(final)
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_curves_draw_profacts_process_rewards(tmp_path):
    rows = [{"step": s, "reward": 1.5, "rewards/reward_total/mean": 1.5, "rewards/reward_label/mean": 0.3,
             "rewards/reward_question/mean": 0.9, "rewards/reward_qa/mean": 0.7} for s in (1, 2)]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert curve_series(read_metrics(path))["Rollout rewards"] == {
        "total": ([1, 2], [1.5, 1.5]), "label": ([1, 2], [0.3, 0.3]),
        "question METEOR": ([1, 2], [0.9, 0.9]), "question-answer METEOR": ([1, 2], [0.7, 0.7])}


def _lora_bf16(tiny_model, out):
    cfg = load_run_config(
        REPO / "tests" / "fixtures" / "tiny_grpo.toml",
        {"model.id": str(tiny_model), "output_dir": str(out), "model.lora": True, "model.lora_layers": 1,
         "data.data_dir": str(REPO / "tests" / "fixtures" / "tiny_claims.jsonl"),
         "grpo.max_steps": 2, "grpo.bf16": True, "grpo.gradient_checkpointing": False},
    )
    assert isinstance(cfg, GRPORunConfig)
    return cfg


def test_cpu_bf16_frozen_weight_casts_change_no_number(tiny_model, tmp_path):
    """LoRA on a CPU under bf16 autocast: the frozen weights cast once a run train to the
    same rollouts, losses and weights as autocast's casts at every call."""
    runs = {}
    for cast in (True, False):
        VowelEnv.autocast_seen.clear()
        final = train_grpo(_lora_bf16(tiny_model, tmp_path / str(cast)), cast_weights=cast)
        assert VowelEnv.autocast_seen and all(VowelEnv.autocast_seen)
        rows = [r for r in read_metrics(tmp_path / str(cast) / "metrics.jsonl") if "loss" in r]
        runs[cast] = ([(r["loss"], r["grad_norm"], r["rewards/reward_total/mean"]) for r in rows], _weights(final))
    (m1, w1), (m0, w0) = runs[True], runs[False]
    assert len(m1) == 2 and m1 == m0
    assert w1.keys() == w0.keys() and all(torch.equal(w1[k], w0[k]) for k in w1)
    assert all(v.dtype == torch.float32 for v in w1.values())
    base = _weights(tiny_model)
    assert any(not torch.equal(base[k], w1[k]) for k in base)  # it trained


def test_frozen_weight_casts_hold_for_a_step_and_give_the_float32_weights_back(tiny_model):
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from factrl.train.callbacks import FrozenWeightCasts
    from factrl.train.lora import lora_config

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny_model)),
                           lora_config(str(tiny_model), r=4, alpha=8, layers=1,
                                       targets=["q_proj", "v_proj"]))
    frozen = {n: p for n, p in model.named_parameters() if not p.requires_grad and p.dim() == 2 and "embed" not in n}
    before = {n: p.detach().clone() for n, p in frozen.items()}
    cb = FrozenWeightCasts(torch.bfloat16)
    for _ in range(2):  # the casts are kept across steps
        cb.on_step_begin(None, None, None, model=model)
        assert all(p.dtype == torch.bfloat16 for p in frozen.values())
        assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
        assert all(torch.equal(p, before[n].to(torch.bfloat16)) for n, p in frozen.items())
        cb.on_step_end(None, None, None)
        assert all(p.dtype == torch.float32 and torch.equal(p, before[n]) for n, p in frozen.items())
    cb.on_step_begin(None, None, None, model=model)
    cb.release()  # training stopped inside a step
    assert all(p.dtype == torch.float32 for p in frozen.values())
