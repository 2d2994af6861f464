"""The bridge between factrl episodes and TRL's GRPOTrainer ``rollout_func`` hook.

``trajectories_to_trl`` is a pure function (tested without TRL): it hands the trainer
the token ids exactly as generated, a per-token ``env_mask`` (1 = sampled by the model,
0 = inserted by the environment) that TRL multiplies into the loss mask — so retrieved
text contributes neither policy loss nor KL — and the reward as extra columns that reach
the reward functions by keyword: ``reward_total`` (optimised), one ``reward_<name>`` per
component the reward declares and one column per declared diagnostic (logged beside it). Only the episode's opening context
(the policy's) is trained; further contexts (sub-agents' segments) are not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from factrl.envs.base import Env
from factrl.rewards.base import Reward
from factrl.rollout import Job, RolloutConfig, run_jobs
from factrl.types import Claim, Trajectory

__all__ = ["reward_columns", "trajectories_to_trl", "EnvRollout", "reward_functions"]

TOTAL = "reward_total"


def _sources(reward: Reward) -> dict[str, str]:
    """Column name → breakdown key: ``reward_<component>``, then the diagnostics."""
    out = {f"reward_{c}": c for c in reward.components}
    out.update({d: d for d in getattr(reward, "diagnostics", ())})
    return out


def reward_columns(reward: Reward) -> tuple[str, ...]:
    """TRL's extra columns for ``reward``: the total first, then its declared components
    and diagnostics."""
    return (TOTAL, *_sources(reward))


def _columns(traj: Trajectory, reward: Reward) -> dict[str, float]:
    c = traj.reward.components
    out = {TOTAL: float(traj.reward.total)}
    out.update({col: float(c.get(key, 0.0)) for col, key in _sources(reward).items()})
    return out


def trajectories_to_trl(trajs: Sequence[Trajectory], eos_token_id: int, reward: Reward, *,
                        keep_inserted: bool = False) -> dict[str, Any]:
    """TRL's rollout dict from finished trajectories.

    An episode that ended properly (an answer was given) gets an EOS appended with
    mask 0, so TRL does not count it as truncated while no loss falls on a token the
    model did not sample. A failed reset yields a one-token dummy with mask 0 and reward 0.
    """
    columns = reward_columns(reward)
    out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "_inserted": []}
    for col in columns:
        out[col] = []
    for t in trajs:
        prompt = list(t.prompt_ids) or [eos_token_id]
        ids, mask, lps, inserted = [], [], [], []
        for turn in t.turns:
            ids += turn.token_ids
            mask += turn.mask
            lps += turn.logprobs if turn.logprobs is not None else [0.0] * len(turn.token_ids)
            inserted += [int(not m) for m in turn.mask]
        last_finish = next((x.finish_reason for x in reversed(t.turns) if x.source == "model"), None)
        if not ids or (last_finish != "length" and ids[-1] != eos_token_id):
            ids, mask, lps, inserted = ids + [eos_token_id], mask + [0], lps + [0.0], inserted + [0]
        out["prompt_ids"].append(prompt)
        out["completion_ids"].append(ids)
        out["logprobs"].append(lps)
        out["env_mask"].append(mask)
        out["_inserted"].append(inserted)
        cols = _columns(t, reward) if t.prompt_ids else dict.fromkeys(columns, 0.0)
        for col in columns:
            out[col].append(cols[col])
    if not keep_inserted:
        del out["_inserted"]
    return out


def _column_reward(column: str) -> Callable[..., list[float]]:
    def reward(completions: list, **kwargs: Any) -> list[float]:
        return [float(x) for x in kwargs[column]]

    reward.__name__ = column
    return reward


def reward_functions(reward: Reward, *, control: str = "none") -> tuple[list[Callable[..., list[float]]], list[float]]:
    """Reward functions and weights for TRL: the total is optimised (weight 1); the
    components are logged beside it (weight 0); under a control, the unaltered total too."""
    columns = reward_columns(reward)
    if control != "none":
        from factrl.train.controls import UNALTERED

        columns = (*columns, UNALTERED)
    funcs = [_column_reward(c) for c in columns]
    weights = [1.0] + [0.0] * (len(columns) - 1)
    return funcs, weights


def _count(seen: dict[str, int], key: str) -> int:
    seen[key] = seen.get(key, -1) + 1
    return seen[key]


class EnvRollout:
    """``rollout_func(prompts, trainer)`` running factrl environments with the policy.

    Prompts are keys into ``claims`` (TRL passes only prompt strings, already repeated
    ``num_generations`` times). Generation uses the trainer's live model through the
    factrl HF backend, so logprobs match what the trainer recomputes.
    """

    def __init__(
        self,
        claims: dict[str, Claim],
        make_env: Callable[[], Env],
        rollout: RolloutConfig,
        reward: Reward,
        *,
        on_trajectories: Callable[[list[Trajectory]], None] | None = None,
        lms: dict[str, Any] | None = None,
        control: str = "none",
    ) -> None:
        from factrl.train.controls import check_control

        self.control = check_control(control)
        self.lms = dict(lms or {})  # other roles' LMs (e.g. a frozen search agent); never trained
        self.claims = claims
        self.make_env = make_env
        self.reward = reward
        self.rollout = rollout
        self.on_trajectories = on_trajectories
        self.calls = 0

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        import torch
        from trl.models.utils import unwrap_model_for_generation

        from factrl.lm.hf import HFLM

        try:
            claims = [self.claims[p] for p in prompts]
        except KeyError as exc:
            raise KeyError(f"rollout got a prompt that is not a training claim key: {exc}") from None
        seed = None if self.rollout.seed is None else self.rollout.seed + 7919 * self.calls
        cfg = RolloutConfig(**{**self.rollout.__dict__, "group": 1, "seed": seed})
        # the trainer's mixed precision (bf16/fp16 autocast, or none) covers generation too
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model, \
                torch.no_grad(), trainer.accelerator.autocast():
            was_training = model.training
            model.eval()
            try:
                # On a GPU the whole rollout batch decodes together (the decode engine's slots).
                on_gpu = next(model.parameters()).device.type == "cuda"
                lm = HFLM(model, trainer.processing_class, max_batch_size=max(32, cfg.batch_size) if on_gpu else 32)
                # TRL repeats each prompt num_generations times: number the repeats, so
                # each group member samples with its own seed.
                seen: dict[str, int] = {}
                jobs = [Job(self.make_env, c, group_index=_count(seen, c.id)) for c in claims]
                trajs = run_jobs(jobs, lm, cfg, reward=self.reward, lms=self.lms)
            finally:
                model.train(was_training)
        self.calls += 1
        if self.on_trajectories is not None:
            self.on_trajectories(trajs)
        out = trajectories_to_trl(trajs, trainer.processing_class.eos_token_id, self.reward,
                                  keep_inserted=self.control == "invert_mask")
        if self.control != "none":  # a broken-trainer control (tests and benchmarks only)
            from factrl.train.controls import apply_control

            apply_control(out, list(prompts), self.control, total=TOTAL, seed=(self.rollout.seed or 0) + self.calls)
            out.pop("_inserted", None)
        return out
