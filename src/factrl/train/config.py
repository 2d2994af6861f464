"""Training run configuration: one TOML file (or a bundled preset) → typed settings.

Batch sizes are given in the papers' terms (prompts per generation, prompts per
optimiser update, rollouts per prompt) and converted to TRL's micro-batch terms in
:func:`trl_batch_args`.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from factrl.datasets.prepare import DataSettings  # the [data] table; datasets owns it

__all__ = [
    "PresetInfo",
    "ModelSettings",
    "DataSettings",
    "EnvSettings",
    "RolloutSettings",
    "GRPOSettings",
    "GRPORunConfig",
    "load_run_config",
    "list_presets",
    "parse_overrides",
    "trl_batch_args",
]


@dataclass
class PresetInfo:
    name: str = "custom"
    paper: str = ""  # the paper section the hyperparameters come from
    scaled_down: bool = False  # True: a CPU-sized variant, not the paper's setting
    notes: str = ""


@dataclass
class ModelSettings:
    id: str = "smollm2"  # 'smollm2' (embedded), a local path or a hub id
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


@dataclass
class EnvSettings:
    name: str = "veri_r1"  # an ENVS registry name
    mode: str = "online"  # online | offline
    index: str | None = None  # index directory (online search; offline context)
    max_searches: int = 3
    top_k: int = 3
    reward: dict[str, Any] = field(default_factory=dict)  # VeriR1RewardConfig overrides
    context_sentences: int = 16  # offline: context sentences besides the gold evidence


@dataclass
class RolloutSettings:
    temperature: float = 0.8
    max_new_tokens: int = 512  # per model turn
    max_total_tokens: int = 2048  # model + observation tokens in one episode
    batch_size: int = 64  # episodes generated together


@dataclass
class GRPOSettings:
    learning_rate: float = 1e-6
    beta: float = 0.001  # KL coefficient (k3 / low_var_kl estimator in TRL)
    num_generations: int = 3  # rollouts per prompt (GRPO group)
    prompts_per_generation: int = 256
    prompts_per_update: int = 64  # optimiser mini-batch
    micro_batch_size: int = 8  # completions per forward/backward
    num_iterations: int = 1
    epsilon: float = 0.2
    loss_type: str = "grpo"
    max_steps: int = 100  # optimiser updates
    max_minutes: float | None = None  # stop (and save) after this much training time
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    save_steps: int = 25
    save_total_limit: int = 3
    logging_steps: int = 1
    seed: int = 0
    scale_rewards: str = "group"
    mask_truncated_completions: bool = False
    # Recompute activations in the backward pass (TRL's default): saves memory on big
    # models, costs an extra forward; CPU presets turn it off for the 135M model.
    gradient_checkpointing: bool = True
    # bf16 mixed precision (fp32 master weights, bf16 autocast for forward/backward and
    # for the rollouts' generation). On CPUs with bf16 units (AMX, AVX512-BF16) a
    # forward+backward runs ~1.7x faster; elsewhere it can be slower. GPU runs want it too.
    bf16: bool = False


@dataclass
class GRPORunConfig:
    preset: PresetInfo = field(default_factory=PresetInfo)
    model: ModelSettings = field(default_factory=ModelSettings)
    data: DataSettings = field(default_factory=DataSettings)
    env: EnvSettings = field(default_factory=EnvSettings)
    rollout: RolloutSettings = field(default_factory=RolloutSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    output_dir: str = "runs/grpo"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown setting(s) {unknown}; known: {sorted(known)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        default = getattr(cls(), name)
        if is_dataclass(default):
            if not isinstance(value, dict):
                raise ValueError(f"{where}.{name} must be a table")
            kwargs[name] = _build(type(default), value, f"{where}.{name}")
        else:
            kwargs[name] = value
    return cls(**kwargs)


def list_presets() -> list[str]:
    return sorted(p.name[:-5] for p in files("factrl.presets").iterdir() if p.name.endswith(".toml"))


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["grpo.max_steps=10", "model.id=smollm2"]`` → ``{"grpo.max_steps": 10, ...}``;
    each value is read as JSON when it parses (numbers, booleans, lists), else kept as text."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"expected key=value, got {item!r}")
        key, raw = item.split("=", 1)
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def load_run_config(source: str | Path, overrides: dict[str, Any] | None = None) -> GRPORunConfig:
    """Read a TOML file, or a bundled preset by name (``factrl train presets`` lists them).

    ``overrides`` maps dotted keys (``"grpo.max_steps"``) to values.
    """
    path = Path(source)
    if path.suffix != ".toml" and not path.exists():
        if str(source) not in list_presets():
            raise ValueError(f"no config file or preset {str(source)!r}; presets: {', '.join(list_presets())}")
        text = (files("factrl.presets") / f"{source}.toml").read_text()
        where = f"preset {source}"
    else:
        text = path.read_text()
        where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{where}: not valid TOML ({exc})") from None
    for key, value in (overrides or {}).items():
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return _build(GRPORunConfig, data, where)


def trl_batch_args(g: GRPOSettings, num_processes: int = 1) -> dict[str, int]:
    """Paper-style batch sizes → TRL's ``per_device_train_batch_size``,
    ``gradient_accumulation_steps`` and ``steps_per_generation`` (in micro-steps)."""
    per_update = g.prompts_per_update * g.num_generations
    if g.prompts_per_generation % g.prompts_per_update:
        raise ValueError("prompts_per_generation must be a multiple of prompts_per_update")
    denom = g.micro_batch_size * num_processes
    if per_update % denom:
        raise ValueError(
            f"prompts_per_update × num_generations ({per_update}) must be a multiple of "
            f"micro_batch_size × processes ({denom})"
        )
    accum = per_update // denom
    return {
        "per_device_train_batch_size": g.micro_batch_size,
        "gradient_accumulation_steps": accum,
        "steps_per_generation": accum * (g.prompts_per_generation // g.prompts_per_update),
    }
