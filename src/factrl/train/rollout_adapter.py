"""The bridge between factrl episodes and TRL's GRPOTrainer ``rollout_func`` hook.

``trajectories_to_trl`` is a pure function (tested without TRL): it hands the trainer
the token ids exactly as generated, a per-token ``env_mask`` (1 = sampled by the model,
0 = inserted by the environment) that TRL multiplies into the loss mask — so retrieved
text contributes neither policy loss nor KL — and the reward as extra columns that reach
the reward functions by keyword: ``reward_total`` (optimised), one ``reward_<name>`` per
component the reward declares and one column per declared diagnostic (logged beside it).

Every context the policy generated in is trained, each as its own TRL completion. An
episode may open further contexts (a :class:`~factrl.types.Segment`: ProFact's search
context per question, reset between questions; HARIS's search agent); those of a role
the environment declares in ``segment_budget`` and the policy plays (a role not mapped to
another LM in ``lms``) are trained like the opening one. Segments of undeclared roles
(the ``decompose`` baseline's sub-claim contexts) stay untrained.

Why one completion per context, and not the contexts concatenated into one: TRL scores a
completion as one causal sequence after its prompt, so a later context's tokens would be
conditioned on everything before them in the row — the opening context and earlier
segments — while the model sampled them after that context's own prompt only (ProFact's
context isolation: a question's search never sees another's results). Concatenation is
exact only when each later context starts with the earlier one; factrl's segments do not.

TRL's contract is that ``rollout_func`` returns exactly ``len(prompts)`` completions, and
it normalises rewards over each run of ``num_generations`` consecutive rows. So an
environment that opens segments declares how many at most (``segment_budget``), a
trajectory is given a fixed number of rows R = 1 + that many
(:func:`contexts_per_trajectory`), and the trainer asks TRL for ``num_generations`` = G·R
copies of each prompt: the rollout runs G episodes per claim and fills the G·R rows with
each episode's contexts — its opening context first, then its policy segments in order,
then masked one-token rows (prompt and completion one EOS, ``env_mask`` 0) up to R. Every
row of a trajectory carries that trajectory's reward, so each group's mean is the mean
over its G trajectories and every context gets the trajectory's advantage. What this
costs: padding rows (no loss, some compute); TRL's group std is taken over G·R values
with each trajectory's repeated R times, which scales advantages by
sqrt((G·R − 1) / (R·(G − 1))) (1.06 at G = 8, R = 6; exactly 1 with ``scale_rewards =
"none"``); and with a per-sequence loss (``loss_type = "grpo"``) every context counts as
a sequence, padding rows as empty ones — token-level losses (``dapo``, ``bnpo``) weigh
every model token alike. Environments without segments (Veri-R1) keep R = 1: one row
per episode, exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

from factrl.envs.base import Env
from factrl.rewards.base import Reward
from factrl.rollout import Job, RolloutConfig, run_jobs
from factrl.types import Claim, Trajectory, Turn

__all__ = ["reward_columns", "trajectories_to_trl", "contexts_per_trajectory", "trained_roles", "trajectory_rows",
           "EnvRollout", "reward_functions"]

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


def trained_roles(env: Env, lms: dict[str, Any] | None = None) -> frozenset[str]:
    """The segment roles a trainer optimises: declared in the environment's
    ``segment_budget`` and played by the policy (a role in ``lms`` is another, frozen LM's)."""
    budget = getattr(env, "segment_budget", None) or {}
    return frozenset(role for role in budget if role not in (lms or {}))


def contexts_per_trajectory(env: Env, lms: dict[str, Any] | None = None) -> int:
    """R, the TRL rows of one trajectory: its opening context plus the most segments of
    the :func:`trained_roles` an episode opens."""
    budget = getattr(env, "segment_budget", None) or {}
    return 1 + sum(int(budget[role]) for role in trained_roles(env, lms))


class Row(NamedTuple):
    """One TRL completion: its prompt ids, completion ids, ``env_mask`` and logprobs, and
    which completion tokens the environment inserted (for the ``invert_mask`` control)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    inserted: list[int]


TRAINED_TURNS = ("all", "last")


def check_trained_turns(value: str, *, key: str = "grpo.trained_turns") -> str:
    """``"all"`` (every model turn of a trained context carries loss) or ``"last"``
    (only its last model turn; earlier ones are masked like observations)."""
    if value not in TRAINED_TURNS:
        raise ValueError(f"{key} must be one of {', '.join(TRAINED_TURNS)}, got {value!r}")
    return value


def _row(prompt_ids: list[int], turns: list[Turn], eos_token_id: int, *, last_turn_only: bool = False) -> Row:
    """One context as a completion. A context that ended properly gets an EOS appended
    with mask 0, so TRL does not count it as truncated while no loss falls on a token
    the model did not sample. ``last_turn_only``: the model turns before the context's
    last one get mask 0 too (still conditioned on, never trained; they stay model tokens
    for the ``invert_mask`` control)."""
    last_model = max((i for i, t in enumerate(turns) if t.source == "model"), default=-1)
    ids, mask, lps, inserted = [], [], [], []
    for i, turn in enumerate(turns):
        ids += turn.token_ids
        mask += [0] * len(turn.mask) if last_turn_only and turn.source == "model" and i != last_model else turn.mask
        lps += turn.logprobs if turn.logprobs is not None else [0.0] * len(turn.token_ids)
        inserted += [int(not m) for m in turn.mask]
    last_finish = next((x.finish_reason for x in reversed(turns) if x.source == "model"), None)
    if not ids or (last_finish != "length" and ids[-1] != eos_token_id):
        ids, mask, lps, inserted = ids + [eos_token_id], mask + [0], lps + [0.0], inserted + [0]
    return Row(list(prompt_ids) or [eos_token_id], ids, mask, lps, inserted)


def trajectory_rows(traj: Trajectory, eos_token_id: int, *, rows: int = 1,
                    roles: Collection[str] = (), last_turn_only: bool = False) -> list[Row]:
    """Exactly ``rows`` completions for one trajectory: its opening context, each segment
    of a role in ``roles`` (in the order opened), then one-token padding rows (mask 0). A
    failed reset gives padding only. More such segments than ``rows - 1`` is an error
    (the environment's ``segment_budget`` was wrong). ``last_turn_only``: each row trains
    only its context's last model turn."""
    pad = Row([eos_token_id], [eos_token_id], [0], [0.0], [0])
    if not traj.prompt_ids:
        return [pad] * rows
    out = [_row(traj.prompt_ids, traj.turns, eos_token_id, last_turn_only=last_turn_only)]
    out += [_row(seg.prompt_ids, seg.turns, eos_token_id, last_turn_only=last_turn_only) for seg in traj.segments
            if seg.role in roles and seg.prompt_ids]
    if len(out) > rows:
        raise RuntimeError(f"trajectory {traj.claim_id!r} has {len(out)} trainable contexts, more than the "
                           f"{rows} rows per trajectory its environment declared (segment_budget)")
    return out + [pad] * (rows - len(out))


def trajectories_to_trl(trajs: Sequence[Trajectory], eos_token_id: int, reward: Reward, *,
                        rows_per_trajectory: int = 1, roles: Collection[str] = (),
                        keep_inserted: bool = False, last_turn_only: bool = False) -> dict[str, Any]:
    """TRL's rollout dict from finished trajectories: ``rows_per_trajectory`` rows each
    (:func:`trajectory_rows`, with ``last_turn_only``), in trajectory order, every row
    with its trajectory's reward columns (0 for a failed reset); ``keep_inserted`` adds
    ``_inserted`` (per row, which tokens the environment inserted) for a broken-trainer
    control."""
    columns = reward_columns(reward)
    out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "_inserted": []}
    for col in columns:
        out[col] = []
    for t in trajs:
        cols = _columns(t, reward) if t.prompt_ids else dict.fromkeys(columns, 0.0)
        for row in trajectory_rows(t, eos_token_id, rows=rows_per_trajectory, roles=roles,
                                   last_turn_only=last_turn_only):
            out["prompt_ids"].append(row.prompt_ids)
            out["completion_ids"].append(row.completion_ids)
            out["logprobs"].append(row.logprobs)
            out["env_mask"].append(row.env_mask)
            out["_inserted"].append(row.inserted)
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
    ``num_generations`` times, consecutively). With ``rows_per_trajectory`` R (see the
    module docstring) TRL's ``num_generations`` is G·R: every R consecutive copies of a
    prompt are one episode, whose R contexts fill those rows. Generation uses the
    trainer's live model through the factrl HF backend, so logprobs match what the
    trainer recomputes.
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
        rows_per_trajectory: int = 1,
        roles: Collection[str] = (),
        control: str = "none",
        trained_turns: str = "all",
        group_size: int = 1,
        resample_constant: int = 0,
        resample_on: str = "total",
    ) -> None:
        from factrl.train.controls import check_control
        from factrl.train.dynamic_sampling import ResampleCounts

        if rows_per_trajectory < 1:
            raise ValueError(f"rows_per_trajectory must be >= 1, got {rows_per_trajectory}")
        self.control = check_control(control)
        self.trained_turns = check_trained_turns(trained_turns)
        self.lms = dict(lms or {})  # other roles' LMs (e.g. a frozen search agent); never trained
        self.rows = int(rows_per_trajectory)
        self.roles = frozenset(roles)  # segment roles trained beside the opening context
        self.claims = claims
        self.make_env = make_env
        self.reward = reward
        self.rollout = rollout
        self.on_trajectories = on_trajectories
        self.calls = 0
        # dynamic sampling (factrl.train.dynamic_sampling): G episodes a group, tries a slot
        if group_size < 1 or resample_constant < 0:
            raise ValueError(f"group_size must be >= 1 and resample_constant >= 0, got {group_size}, {resample_constant}")
        self.group_size, self.resample_constant = int(group_size), int(resample_constant)
        self.resample_on = resample_on
        self.resampled = ResampleCounts()

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        import torch
        from trl.models.utils import unwrap_model_for_generation

        from factrl.lm.hf import HFLM

        try:
            claims = [self.claims[p] for p in prompts]
        except KeyError as exc:
            raise KeyError(f"rollout got a prompt that is not a training claim key: {exc}") from None
        episodes = _episode_starts(claims, self.rows)
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
                # TRL repeats each prompt num_generations times: number the episodes, so
                # each group member samples with its own seed.
                seen: dict[str, int] = {}

                def rollout(claims: list[Claim]) -> list[Trajectory]:
                    jobs = [Job(self.make_env, c, group_index=_count(seen, c.id)) for c in claims]
                    return run_jobs(jobs, lm, cfg, reward=self.reward, lms=self.lms)

                trajs = rollout(episodes)
                if self.resample_constant:
                    trajs = self._resample(trajs, episodes, rollout)
            finally:
                model.train(was_training)
        self.calls += 1
        if self.on_trajectories is not None:
            self.on_trajectories(trajs)
        from factrl.train.controls import INVERTED, apply_control

        out = trajectories_to_trl(trajs, trainer.processing_class.eos_token_id, self.reward,
                                  rows_per_trajectory=self.rows, roles=self.roles,
                                  keep_inserted=self.control in INVERTED,
                                  last_turn_only=self.trained_turns == "last")
        if self.control != "none":  # a broken-trainer control (tests and benchmarks only)
            apply_control(out, list(prompts), self.control, total=TOTAL, seed=(self.rollout.seed or 0) + self.calls)
            out.pop("_inserted", None)
        return out

    def _resample(self, trajs: list[Trajectory], episodes: list[Claim],
                  rollout: Callable[[list[Claim]], list[Trajectory]]) -> list[Trajectory]:
        """Constant groups replaced by groups of other claims (dynamic sampling), rolled out
        by ``rollout`` (the same live policy and sampling settings); counted in
        :attr:`resampled`."""
        import random

        from factrl.train.dynamic_sampling import resample_constant_groups

        rng = random.Random(f"{self.rollout.seed}|{self.calls}|resample")
        out, counts = resample_constant_groups(trajs, episodes, self.group_size, list(self.claims.values()),
                                               self.resample_constant, rng, rollout, self.resample_on)
        self.resampled.add(counts)
        return out


def _episode_starts(claims: list[Claim], rows: int) -> list[Claim]:
    """One claim per episode: every ``rows`` consecutive copies of a prompt are one
    episode's rows (TRL repeats each prompt ``num_generations`` = G·R times in a row)."""
    if rows == 1:
        return list(claims)
    if len(claims) % rows:
        raise ValueError(f"the rollout got {len(claims)} prompts, not a multiple of the {rows} rows per trajectory")
    starts = claims[::rows]
    for i, claim in enumerate(starts):
        if any(c.id != claim.id for c in claims[i * rows:(i + 1) * rows]):
            raise ValueError(f"the rollout's prompts are not in runs of {rows} copies (TRL's num_generations = "
                             "G x rows per trajectory keeps each prompt's copies together)")
    return starts
