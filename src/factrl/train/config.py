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
from factrl.envs.base import DEFAULT_AGENT

__all__ = [
    "PresetInfo",
    "ModelSettings",
    "DataSettings",
    "EnvSettings",
    "RewardSettings",
    "RolloutSettings",
    "GRPOSettings",
    "GRPORunConfig",
    "HarisSettings",
    "load_run_config",
    "list_presets",
    "parse_overrides",
    "trl_batch_args",
    "grpo_args",
    "precision_args",
    "training_precision",
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
    # Where the run's models live: auto (CUDA when available), cpu, cuda or cuda:N
    # (factrl.lm.device). TRL trains on the first visible GPU: pick another with
    # CUDA_VISIBLE_DEVICES.
    device: str = "auto"
    # The policy keeps float32 master weights; dtype is its mixed precision (bfloat16 or
    # float16 autocast, TRL's bf16/fp16) and the weights of the frozen models it calls
    # (searcher, judges, held-out evaluation). auto: bfloat16 on a GPU that has it, else
    # float32. grpo.bf16 = true is the older spelling of dtype = "bfloat16".
    dtype: str = "auto"
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    # Adapt only the top N transformer blocks (factrl.train.lora); unset: every block.
    lora_layers: int | None = None


@dataclass
class EnvSettings:
    name: str = DEFAULT_AGENT  # the agent: an ENVS registry name
    # The environment's parameters (Veri-R1: mode = "online" | "offline", max_searches, top_k, ...)
    params: dict[str, Any] = field(default_factory=dict)
    index: str | None = None  # index directory: what the agent searches, and offline context sentences
    context_sentences: int = 16  # offline: context sentences besides the gold evidence
    # Parameters of the agent's own held-out metrics (``factrl eval --metric-param``), e.g.
    # Binary RAR's {extract = "sentences", judge = "choice"}; checked when the config loads.
    metric_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class RewardSettings:
    name: str | None = None  # a REWARDS name; None: the environment's default reward
    params: dict[str, Any] = field(default_factory=dict)  # e.g. VeriR1RewardConfig fields
    # The LM a reward calls (Binary RAR's verifier): a model id as for model.id, or
    # "openai:NAME" with verifier_base_url; None = the policy's model id, loaded frozen.
    verifier: str | None = None
    verifier_base_url: str | None = None


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
    # Learning-rate schedule, by transformers' names ("linear" = TRL's default: decay to 0
    # at max_steps; "constant"; "constant_with_warmup" = Veri-R1 / verl's "constant").
    lr_scheduler_type: str = "linear"
    # Linear warm-up from 0, as a fraction of max_steps (Veri-R1: 0.285, verl's
    # lr_warmup_steps_ratio) or as a number of updates; set at most one of the two.
    warmup_ratio: float = 0.0
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
    # forward+backward runs ~1.7x faster; elsewhere it can be slower. The same as
    # model.dtype = "bfloat16"; a GPU run gets it from model.dtype = "auto" already.
    bf16: bool = False
    # Label-balanced updates: the training claims go in label-interleaved order (each
    # label's claims shuffled with ``seed``) and TRL does not reshuffle them, so every
    # update's prompts cover the labels as evenly as the data allows (a warm-up biased
    # towards one label otherwise sees mostly that label's claims rewarded).
    label_balanced: bool = False
    # With label_balanced: claims of each gold label per round of the interleave (any
    # label spelling; default 1 each), e.g. {"NEI" = 2}: half of every update's prompts
    # are NOT ENOUGH INFO claims. A reward that pays SUPPORT/REFUTE answers more on
    # two-thirds of balanced prompts (Veri-R1's evidence term) otherwise pushes a model
    # that cannot yet tell NOT ENOUGH INFO apart away from that label.
    label_mix: dict[str, int] = field(default_factory=dict)
    # A deliberately broken trainer, for learning benchmarks and tests only
    # (factrl.train.controls): "none", "flip_advantage", "invert_mask", "shuffle_rewards",
    # and the diagnostic "invert_mask_no_echo".
    control: str = "none"
    # Which model turns of a trained context carry loss: "all" (every turn the model
    # sampled) or "last" (only its last turn — e.g. HARIS's final verification — the
    # earlier ones conditioned on but masked like observations, so a verdict reward
    # does not also rewrite the questions that led to it).
    trained_turns: str = "all"
    # Dynamic sampling (DAPO): a group whose rewards are all equal (no advantage) is rolled
    # out again on another training claim of its gold label, up to this many tries, and
    # the first that varies takes its place (factrl.train.dynamic_sampling); 0 = off.
    resample_constant: int = 0
    # What must vary for a group to count as informative: "total" (the reward) or reward
    # components, comma-separated, the first the stage's reward has: "label_correct,useful"
    # is DAPO's accuracy criterion for HARIS (format-only variation counts as constant).
    resample_on: str = "total"
    # The label-balanced training order's seed (None: grpo.seed), to tell what the order
    # does from what the rollouts' sampling and the adapter's initialisation do.
    order_seed: int | None = None


@dataclass
class HarisSettings:
    """HARIS coordinated training (Algorithm 1); used by ``factrl train haris`` only."""

    rounds: int = 1  # N alternating rounds after the foundation stage (T split into N segments)
    searcher_model: str | None = None  # the search agent's starting model (default: model.id)
    judge_model: str = "smollm2"  # the low-level reward's LM judge (paper: GPT-4o-mini); "openai:NAME" works;
    # "factrl-verifier": the trained cross-encoder instead of an LM; "exact": the report states
    # the pseudo-gold answer (rewards.haris.exact_useful; for data with exact answers)
    judge_base_url: str | None = None
    answer_model: str = "smollm2"  # writes pseudo-gold answers from the gold evidence (paper: GPT-4o);
    # "gold": the data's own hop answers (a generated world's per-hop questions), no LM
    answer_base_url: str | None = None
    searcher_params: dict[str, Any] = field(default_factory=dict)  # haris_searcher env params
    epochs_per_stage: float = 1.0  # the paper trains one epoch per stage
    steps_per_stage: int = 0  # > 0: this many GRPO updates per stage instead of epochs_per_stage
    # > 0: the reasoner stages' updates instead of steps_per_stage (the search agent keeps it):
    # a warm-up that already reads well needs more verdict updates than search-agent ones
    reasoner_steps_per_stage: int = 0
    # > 0: a synthesis stage runs the reasoner on this many of its claims (label-interleaved)
    # instead of all — with steps_per_stage, a search-agent stage uses only a few questions
    synth_limit: int = 0
    # When a reasoner rollout asks no question (an untrained small model rarely does), ask
    # the claim itself as the search agent's question; off in the paper's setting.
    fallback_question: bool = False
    # The reasoner stages' grpo.trained_turns ("" = grpo.trained_turns): "last" trains only
    # the reasoner's final verification, leaving its questions as the warm-up asks them
    reasoner_trained_turns: str = ""
    seed: int = 0


@dataclass
class GRPORunConfig:
    preset: PresetInfo = field(default_factory=PresetInfo)
    model: ModelSettings = field(default_factory=ModelSettings)
    data: DataSettings = field(default_factory=DataSettings)
    env: EnvSettings = field(default_factory=EnvSettings)
    reward: RewardSettings = field(default_factory=RewardSettings)
    rollout: RolloutSettings = field(default_factory=RolloutSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    output_dir: str = "runs/grpo"
    haris: HarisSettings = field(default_factory=HarisSettings)

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


def list_presets(package: str = "factrl.presets") -> list[str]:
    return sorted(p.name[:-5] for p in files(package).iterdir() if p.name.endswith(".toml"))


def read_config_toml(source: str | Path, overrides: dict[str, Any] | None = None, *,
                     package: str = "factrl.presets", kind: str = "") -> tuple[dict[str, Any], str]:
    """The TOML table of a file, or of a bundled preset by name from ``package``, with
    ``overrides`` (dotted keys → values) applied; also says where it came from."""
    path = Path(source)
    if path.suffix != ".toml" and not path.exists():
        names = list_presets(package)
        if str(source) not in names:
            raise ValueError(f"no config file or {kind}preset {str(source)!r}; presets: {', '.join(names)}")
        text = (files(package) / f"{source}.toml").read_text()
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
    return data, where


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["grpo.max_steps=10", "model.id=smollm2"]`` → ``{"grpo.max_steps": 10, ...}``;
    each value is read as JSON when it parses (numbers, booleans, lists), else kept as text."""
    from factrl.envs.spec import parse_params

    return parse_params(items)


def load_run_config(source: str | Path, overrides: dict[str, Any] | None = None) -> GRPORunConfig:
    """Read a TOML file, or a bundled preset by name (``factrl train presets`` lists them).

    ``overrides`` maps dotted keys (``"grpo.max_steps"``) to values.
    """
    data, where = read_config_toml(source, overrides)
    cfg = _build(GRPORunConfig, data, where)
    _check_metric_params(cfg.env, where)
    from factrl.train.controls import check_control
    from factrl.train.rollout_adapter import check_trained_turns

    try:
        check_control(cfg.grpo.control)
        check_trained_turns(cfg.grpo.trained_turns)
        if cfg.haris.reasoner_trained_turns:
            check_trained_turns(cfg.haris.reasoner_trained_turns, key="haris.reasoner_trained_turns")
        cfg.grpo.label_mix = label_weights(cfg.grpo.label_mix)
        r = cfg.grpo.resample_constant
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise ValueError(f"grpo.resample_constant must be a whole number >= 0 (tries a constant group), got {r!r}")
        if not isinstance(cfg.grpo.resample_on, str) or not cfg.grpo.resample_on.strip():
            raise ValueError(f"grpo.resample_on must name the reward total ('total') or a reward component, "
                             f"got {cfg.grpo.resample_on!r}")
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return cfg


def label_weights(mix: dict[str, Any]) -> dict[str, int]:
    """``grpo.label_mix`` with canonical label names (``"NEI"`` → ``"NOT ENOUGH INFO"``);
    a ``ValueError`` names an unknown label or a weight that is not a whole number >= 1."""
    from factrl.labels import UnknownLabelError, normalise_label

    if not isinstance(mix, dict):
        raise ValueError(f"grpo.label_mix must be a table of label = claims per round, got {mix!r}")
    out: dict[str, int] = {}
    for raw, w in mix.items():
        try:
            name = normalise_label(raw).value
        except UnknownLabelError as exc:
            raise ValueError(f"grpo.label_mix: {exc}") from None
        if not isinstance(w, int) or isinstance(w, bool) or w < 1:
            raise ValueError(f"grpo.label_mix[{raw!r}] must be a whole number >= 1, got {w!r}")
        out[name] = w
    return out


def _check_metric_params(env: EnvSettings, where: str) -> None:
    """``env.metric_params`` refused at load time (not after hours of training)."""
    if not env.metric_params:
        return
    from factrl.metrics.run_metrics import check_metric_params

    try:
        check_metric_params(env.name, env.metric_params)
    except ValueError as exc:
        raise ValueError(f"{where}: env.metric_params: {exc}") from None


def training_precision(device: str | None, dtype: str | None, bf16: bool = False, *,
                       trainer: str = "trl") -> tuple[str, str]:
    """``(device, dtype)`` a run trains in: a run's ``device``/``dtype`` settings
    (``model.device``/``model.dtype``) resolved for this machine (:mod:`factrl.lm.device`),
    ``bf16`` (``grpo.bf16``) asking for bfloat16.
    A :class:`~factrl.lm.device.DeviceError` (a ``ValueError``) names what cannot be:
    float16 autocast on a CPU, or (``trainer="trl"``) a GPU other than the first visible
    one, which transformers' Trainer does not train on."""
    from factrl.lm.device import DeviceError, resolve_device, resolve_dtype

    asked = dtype
    device = resolve_device(device)
    dtype = resolve_dtype(asked, device)
    if bf16 and dtype != "bfloat16":
        if asked is not None and str(asked).strip().lower() != "auto":
            raise DeviceError(f"grpo.bf16 = true asks for bfloat16 but model.dtype is {asked!r}; set one of them")
        dtype = "bfloat16"
    if dtype == "float16" and device == "cpu":
        raise DeviceError("float16 mixed precision trains on a GPU only; on CPU use model.dtype = bfloat16 or float32")
    if trainer == "trl" and device.startswith("cuda") and device != "cuda:0":
        raise DeviceError(f"{device}: transformers' Trainer trains on the first visible GPU; choose GPU "
                          f"{device[5:]} with CUDA_VISIBLE_DEVICES={device[5:]} and device cuda")
    return device, dtype


def precision_args(device: str, dtype: str) -> dict[str, bool]:
    """The ``TrainingArguments`` flags of a resolved ``(device, dtype)``: ``use_cpu`` on
    the CPU, ``bf16``/``fp16`` mixed precision for a bfloat16/float16 dtype."""
    return {"use_cpu": device == "cpu", "bf16": dtype == "bfloat16", "fp16": dtype == "float16"}


def trl_batch_args(g: GRPOSettings, num_processes: int = 1, rows_per_trajectory: int = 1) -> dict[str, int]:
    """Paper-style batch sizes → TRL's ``per_device_train_batch_size``,
    ``gradient_accumulation_steps`` and ``steps_per_generation`` (in micro-steps).
    ``rows_per_trajectory`` R: each trajectory is R completions (one per trained
    context, :mod:`factrl.train.rollout_adapter`), so an update holds R times the rows."""
    per_update = g.prompts_per_update * g.num_generations * rows_per_trajectory
    if g.prompts_per_generation % g.prompts_per_update:
        raise ValueError("prompts_per_generation must be a multiple of prompts_per_update")
    denom = g.micro_batch_size * num_processes
    if per_update % denom:
        rows = f" × rows per trajectory ({rows_per_trajectory})" if rows_per_trajectory > 1 else ""
        raise ValueError(
            f"prompts_per_update × num_generations{rows} ({per_update}) must be a multiple of "
            f"micro_batch_size × processes ({denom})"
        )
    accum = per_update // denom
    return {
        "per_device_train_batch_size": g.micro_batch_size,
        "gradient_accumulation_steps": accum,
        "steps_per_generation": accum * (g.prompts_per_generation // g.prompts_per_update),
    }


def grpo_args(cfg: GRPORunConfig, rows_per_trajectory: int = 1) -> dict[str, Any]:
    """The keyword arguments of TRL's ``GRPOConfig`` that come from the run config.

    ``train_grpo`` adds only what depends on the code: the reward weights. No TRL import
    (torch only to resolve an ``auto`` device), so tests can check what reaches TRL.
    With ``rows_per_trajectory`` R > 1 (an agent whose policy plays further contexts),
    TRL's ``num_generations`` is ``grpo.num_generations`` × R (see
    :mod:`factrl.train.rollout_adapter`).
    """
    if rows_per_trajectory < 1:
        raise ValueError(f"rows_per_trajectory must be >= 1, got {rows_per_trajectory}")
    g, r = cfg.grpo, cfg.rollout
    if not 0.0 <= g.warmup_ratio < 1.0:
        raise ValueError(f"grpo.warmup_ratio must be in [0, 1), got {g.warmup_ratio}")
    if g.warmup_ratio and g.warmup_steps:
        raise ValueError("set grpo.warmup_ratio or grpo.warmup_steps, not both")
    return {
        "output_dir": str(Path(cfg.output_dir)),
        "learning_rate": g.learning_rate,
        "lr_scheduler_type": g.lr_scheduler_type,
        # transformers 5 has no warmup_ratio: a float in (0, 1) is read as that fraction
        # of the optimiser updates (TrainingArguments.get_warmup_steps rounds it up).
        "warmup_steps": g.warmup_ratio if g.warmup_ratio else g.warmup_steps,
        "beta": g.beta,
        "num_generations": g.num_generations * rows_per_trajectory,
        "num_iterations": g.num_iterations,
        "epsilon": g.epsilon,
        "loss_type": g.loss_type,
        "max_steps": g.max_steps,
        "weight_decay": g.weight_decay,
        "max_grad_norm": g.max_grad_norm,
        "logging_steps": g.logging_steps,
        "save_steps": g.save_steps,
        "save_total_limit": g.save_total_limit,
        "seed": g.seed,
        "scale_rewards": g.scale_rewards,
        "mask_truncated_completions": g.mask_truncated_completions,
        "gradient_checkpointing": g.gradient_checkpointing,
        # the rollout's own budget bounds the episode; +1 leaves room for the closing EOS
        "max_completion_length": r.max_total_tokens + 1,
        "temperature": r.temperature,
        "top_k": 0,  # no top-k cut: the rollout samples the full distribution the trainer scores
        **precision_args(*training_precision(cfg.model.device, cfg.model.dtype, g.bf16)),
        "report_to": [],
        "save_only_model": False,
        "dataloader_num_workers": 0,
        "shuffle_dataset": not g.label_balanced,
        **trl_batch_args(g, rows_per_trajectory=rows_per_trajectory),
    }
