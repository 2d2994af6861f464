"""Run episodes in batches over an LM: the synchronous driver of
:class:`~factrl.episode.Episode` (evaluation, TRL's rollout hook, teachers).

Each round, every unfinished episode asks for one generation; the requests of all
episodes — whatever their environment, stop strings or budget — go to the LM playing
their role in one batched ``generate`` call with one config per row, so an episode's
result does not depend on its batch. The environments then step, and the runner
tokenises what they return. A generate call that fails (an HTTP LM down after its
retries) ends the episodes of the rows that failed with a recorded error
(``"generate failed: ..."``), counted in the run's metrics; the rest of the batch goes
on. Finished trajectories are scored by the reward stage
(the environment's default reward unless one is given).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from factrl.envs.base import Env
from factrl.episode import Episode, EpisodeBudget, GenerateRequest, model_turn, observation_turn, safe_step
from factrl.lm.base import LM, Generation, GenerationConfig, RowFailures
from factrl.rewards.base import Reward, score_by_default
from factrl.types import Claim, Trajectory

__all__ = ["RolloutConfig", "Job", "run_episodes", "run_jobs", "model_turn", "observation_turn", "safe_step"]


@dataclass(frozen=True)
class RolloutConfig:
    """Defaults follow Veri-R1 (temperature 0.8, 512-token responses per turn)."""

    group: int = 1  # rollouts per claim (GRPO's n)
    temperature: float = 0.8
    top_p: float = 1.0
    max_new_tokens: int = 512  # per model turn
    max_total_tokens: int = 4096  # model + observation tokens after the prompt, per episode
    batch_size: int = 16  # episodes generated together
    seed: int | None = None
    no_repeat_ngram: int = 0  # repetition guard per model turn (GenerationConfig); 0 = off, not for training

    @property
    def budget(self) -> EpisodeBudget:
        return EpisodeBudget(max_turn_tokens=self.max_new_tokens, max_total_tokens=self.max_total_tokens)


@dataclass(frozen=True)
class Job:
    """One episode to run: a fresh environment's factory, the claim, the group member."""

    make_env: Callable[[], Env]
    claim: Claim
    group_index: int = 0


def run_episodes(
    make_env: Callable[[], Env],
    claims: Sequence[Claim],
    lm: LM,
    config: RolloutConfig | None = None,
    *,
    on_trajectory: Callable[[Trajectory], None] | None = None,
    reward: Reward | None = None,
    score: bool = True,
    lms: Mapping[str, LM] | None = None,
) -> list[Trajectory]:
    """Roll out ``config.group`` episodes per claim; trajectories come back in claim
    order (group members adjacent), scored by ``reward`` (default: the environment's
    own ``default_reward``; ``score=False`` leaves them unscored), and are also passed to
    ``on_trajectory`` as each batch finishes, so callers can stream them to disk.
    ``lms`` maps other roles (sub-agents) to their LMs; ``lm`` plays the policy."""
    config = config or RolloutConfig()
    jobs = [Job(make_env, c, g) for c in claims for g in range(config.group)]
    return run_jobs(jobs, lm, config, on_trajectory=on_trajectory, reward=reward, score=score, lms=lms)


def run_jobs(
    jobs: Sequence[Job],
    lm: LM,
    config: RolloutConfig | None = None,
    *,
    on_trajectory: Callable[[Trajectory], None] | None = None,
    reward: Reward | None = None,
    score: bool = True,
    lms: Mapping[str, LM] | None = None,
) -> list[Trajectory]:
    """:func:`run_episodes` for explicit jobs: episodes of different environments run
    (and batch) together."""
    config = config or RolloutConfig()
    out: list[Trajectory] = []
    for start in range(0, len(jobs), config.batch_size):
        episodes = [Episode(j.make_env(), j.claim, group_index=j.group_index, budget=config.budget, seed=config.seed)
                    for j in jobs[start : start + config.batch_size]]
        drive(episodes, lm, config, lms=lms)
        trajs = [ep.trajectory() for ep in episodes]
        if score:
            score_by_default(trajs, [getattr(ep.env, "default_reward", None) for ep in episodes], reward)
        for traj in trajs:
            out.append(traj)
            if on_trajectory is not None:
                on_trajectory(traj)
    return out


def drive(episodes: Sequence[Episode], lm: LM, config: RolloutConfig, *, lms: Mapping[str, LM] | None = None) -> None:
    """Run ``episodes`` to the end, one batched generate call per LM per round."""
    roles = dict(lms or {})
    with contextlib.ExitStack() as scope:
        # a context's next turn prefills only its new tokens (backends that can: HFLM's eager path)
        for backend in {id(b): b for b in (lm, *roles.values())}.values():
            if callable(reuse := getattr(backend, "reuse_turns", None)):
                scope.enter_context(reuse())
        _drive(episodes, lm, roles, config)


def _drive(episodes: Sequence[Episode], lm: LM, roles: dict[str, LM], config: RolloutConfig) -> None:
    def lm_of(role: str) -> LM:
        return roles.get(role, lm)

    for ep in episodes:
        messages = ep.start()
        if messages is not None:
            _tokenise(ep, lambda: ep.open(lm_of(ep.contexts[0].role).chat_prompt_ids(messages)))
    while True:
        pending = [(ep, req) for ep in episodes if (req := ep.request()) is not None]
        if not pending:
            return
        # one call per LM and temperature (rows of one call share it; a role may have its own)
        by_lm: dict[tuple[int, float], list[tuple[Episode, GenerateRequest]]] = {}
        for ep, req in pending:
            temp = config.temperature if req.temperature is None else req.temperature
            by_lm.setdefault((id(lm_of(req.role)), temp), []).append((ep, req))
        for (_, temp), rows in by_lm.items():
            backend = lm_of(rows[0][1].role)
            cfgs = [GenerationConfig(max_new_tokens=r.max_new_tokens, temperature=temp,
                                     top_p=config.top_p, stop=r.stop, seed=r.seed, meta=r.meta,
                                     no_repeat_ngram=config.no_repeat_ngram) for _, r in rows]
            t0 = time.perf_counter()
            gens, errors = _generate(backend, [r.context for _, r in rows], cfgs)
            elapsed = time.perf_counter() - t0
            for (ep, _), gen, gen_error in zip(rows, gens, errors):
                if gen is None:  # this row's generation failed: its episode ends, the others go on
                    gen_error = gen_error or RuntimeError("the LM returned no generation for this row")
                    ep.fail(f"generate failed: {type(gen_error).__name__}: {gen_error}")
                    continue
                text = ep.take(gen.token_ids, gen.logprobs, gen.text, gen.finish_reason, elapsed)
                t1 = time.perf_counter()
                step, error = safe_step(ep.env, text)
                need = ep.after_step(step, error, time.perf_counter() - t1)
                if need is not None:
                    codec = lm_of(need.role)
                    _tokenise(ep, lambda: ep.give(
                        prompt_ids=None if need.messages is None else codec.chat_prompt_ids(need.messages),
                        observation_ids=None if need.observation is None else codec.encode(need.observation),
                    ))


def _generate(
    backend: LM, prompts: list[list[int]], cfgs: list[GenerationConfig]
) -> tuple[list[Generation | None], list[BaseException | None]]:
    """One batched generate call; a failure fails its rows, never the whole run: a
    :class:`~factrl.lm.base.RowFailures` fails the rows it names, any other exception
    (e.g. an HTTP LM that is down after its retries) every row of the call."""
    try:
        gens = backend.generate(prompts, cfgs)
    except RowFailures as exc:
        return exc.generations, exc.errors
    except Exception as exc:
        return [None] * len(prompts), [exc] * len(prompts)
    if len(gens) != len(prompts):
        err = RuntimeError(f"the LM returned {len(gens)} generations for {len(prompts)} prompts")
        return [None] * len(prompts), [err] * len(prompts)
    return list(gens), [None] * len(prompts)


def _tokenise(ep: Episode, action: Callable[[], None]) -> None:
    try:
        action()
    except Exception as exc:  # e.g. a context too long for the tokenizer: this episode fails
        ep.fail(f"tokenising failed: {type(exc).__name__}: {exc}")
