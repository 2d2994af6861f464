"""Run episodes in batches over an LM and keep token truth.

The runner owns every token id: the prompt comes from the chat template once, model
turns keep the ids exactly as sampled (mask 1, with their logprobs) and observations
are encoded once and appended with mask 0. Model text is never re-tokenised, so the
ids a trainer sees are the ids that were generated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from factrl.envs.base import Env, StepResult
from factrl.lm.base import LM, GenerationConfig
from factrl.types import Claim, Message, Trajectory, Turn, Verdict

__all__ = ["RolloutConfig", "run_episodes", "model_turn", "observation_turn", "safe_step", "collect_result"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RolloutConfig:
    """Defaults follow Veri-R1 (temperature 0.8, 512-token responses per turn)."""

    group: int = 1  # rollouts per claim (GRPO's n)
    temperature: float = 0.8
    top_p: float = 1.0
    max_new_tokens: int = 512  # per model turn
    max_total_tokens: int = 4096  # model + observation tokens after the prompt
    batch_size: int = 16  # episodes generated together
    seed: int | None = None


@dataclass
class _Episode:
    env: Env
    claim: Claim
    group_index: int
    prompt: list[Message] = field(default_factory=list)
    prompt_ids: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    error: str | None = None
    gen_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    @property
    def n_completion(self) -> int:
        return sum(len(t.token_ids) for t in self.turns)

    def context(self) -> list[int]:
        return self.prompt_ids + [t for turn in self.turns for t in turn.token_ids]


def run_episodes(
    make_env: Callable[[], Env],
    claims: Sequence[Claim],
    lm: LM,
    config: RolloutConfig | None = None,
    *,
    on_trajectory: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """Roll out ``config.group`` episodes per claim; trajectories come back in claim
    order (group members adjacent) and are also passed to ``on_trajectory`` as each
    batch finishes, so callers can stream them to disk."""
    config = config or RolloutConfig()
    jobs = [(c, g) for c in claims for g in range(config.group)]
    out: list[Trajectory] = []
    for start in range(0, len(jobs), config.batch_size):
        chunk = jobs[start : start + config.batch_size]
        episodes = [_start(make_env(), claim, g, lm) for claim, g in chunk]
        _drive(episodes, lm, config, seed_offset=start)
        for ep in episodes:
            traj = _finish(ep)
            out.append(traj)
            if on_trajectory is not None:
                on_trajectory(traj)
    return out


def _start(env: Env, claim: Claim, group_index: int, lm: LM) -> _Episode:
    ep = _Episode(env=env, claim=claim, group_index=group_index)
    try:
        ep.prompt = env.reset(claim)
        ep.prompt_ids = lm.chat_prompt_ids(ep.prompt)
    except Exception as exc:  # bad claim / env set-up: a recorded failure, not a crash
        ep.error = f"reset failed: {type(exc).__name__}: {exc}"
        ep.done = True
    return ep


def _drive(episodes: list[_Episode], lm: LM, config: RolloutConfig, seed_offset: int) -> None:
    round_no = 0
    while True:
        active = [ep for ep in episodes if not ep.done]
        if not active:
            return
        budget = min(config.max_total_tokens - ep.n_completion for ep in active)
        gen_cfg = GenerationConfig(
            max_new_tokens=max(1, min(config.max_new_tokens, budget)),
            temperature=config.temperature,
            top_p=config.top_p,
            stop=active[0].env.stop,
            seed=None if config.seed is None else config.seed + 1000 * seed_offset + round_no,
        )
        t0 = time.perf_counter()
        gens = lm.generate([ep.context() for ep in active], gen_cfg)
        elapsed = time.perf_counter() - t0
        round_no += 1
        for ep, gen in zip(active, gens):
            ep.gen_seconds += elapsed
            ep.turns.append(model_turn(gen.token_ids, gen.logprobs, gen.text, gen.finish_reason, elapsed))
            _advance(ep, gen.text, lm, config)


def _advance(ep: _Episode, text: str, lm: LM, config: RolloutConfig) -> None:
    model_turns = sum(1 for t in ep.turns if t.source == "model")
    step, ep.error = safe_step(ep.env, text)
    if step is None or step.done:
        ep.done = True
        return
    if step.observation:
        ep.turns.append(observation_turn(step.observation, lm.encode))
    if model_turns >= ep.env.max_turns + 1 or ep.n_completion >= config.max_total_tokens:
        # The env should have ended the episode; never loop past the turn budget.
        ep.done = True


def model_turn(
    token_ids: Sequence[int], logprobs: Sequence[float] | None, text: str, finish_reason: str | None, seconds: float
) -> Turn:
    """A model turn exactly as sampled (mask 1)."""
    ids = list(token_ids)
    return Turn(
        source="model",
        text=text,
        token_ids=ids,
        mask=[1] * len(ids),
        logprobs=None if logprobs is None else [float(x) for x in logprobs],
        finish_reason=finish_reason,
        seconds=seconds,
    )


def observation_turn(text: str, encode: Callable[[str], list[int]]) -> Turn:
    """Environment text, encoded once, appended with mask 0."""
    ids = list(encode(text))
    return Turn(source="env", text=text, token_ids=ids, mask=[0] * len(ids))


def safe_step(env: Env, text: str) -> tuple[StepResult | None, str | None]:
    """``env.step`` with failures (e.g. a retriever timing out) turned into an error
    string that ends the episode, rather than an exception that ends the batch."""
    try:
        return env.step(text), None
    except Exception as exc:
        return None, f"env step failed: {type(exc).__name__}: {exc}"


def collect_result(env: Env, traj: Trajectory) -> None:
    """Copy the env's verdict, reward, searches and timings into ``traj``."""
    try:
        res = env.result()
        traj.verdict = res.verdict
        traj.reward = res.reward
        traj.searches = res.searches
        traj.retrieved_ids = res.retrieved_ids
        traj.timings.update(res.timings)
    except Exception as exc:
        traj.error = traj.error or f"result failed: {type(exc).__name__}: {exc}"
        traj.verdict = Verdict(format_ok=False, format_errors=[traj.error])


def _finish(ep: _Episode) -> Trajectory:
    traj = Trajectory(
        claim_id=ep.claim.id,
        env=getattr(ep.env, "name", type(ep.env).__name__),
        claim=ep.claim,
        prompt=ep.prompt,
        prompt_ids=ep.prompt_ids,
        turns=ep.turns,
        group_index=ep.group_index,
        error=ep.error,
    )
    if ep.prompt:
        collect_result(ep.env, traj)
    traj.timings["generate_s"] = ep.gen_seconds
    traj.timings["total_s"] = time.perf_counter() - ep.started
    traj.meta["completion_tokens"] = sum(len(t.token_ids) for t in ep.turns if t.source == "model")
    return traj
