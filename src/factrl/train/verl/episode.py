"""One factrl episode driven through an async generate call — the part of verl's agent
loop that needs no verl, so it is tested on any machine.

It is the async driver of :class:`~factrl.episode.Episode`, the same state machine the
batched runner drives: the prompt is tokenised once from the environment's chat
messages; each model turn keeps the sampled ids exactly (mask 1, with their logprobs);
each observation is encoded once without special tokens and appended with mask 0; model
text is never re-tokenised. The result is a factrl :class:`~factrl.types.Trajectory`,
scored by the reward stage when a reward is given.

Roles: the given ``generate``/``tokenize_prompt``/``encode``/``decode`` are the policy's;
``roles`` gives every other role its own model (:mod:`factrl.train.verl.roles`), and a
role with none is a :class:`~factrl.train.verl.roles.RoleError`. Scoring: with a shared
:class:`~factrl.train.verl.batch.ScoreBatcher`, concurrent episodes are scored together.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from factrl.envs.base import POLICY, Env
from factrl.episode import Episode, EpisodeBudget, safe_step
from factrl.retrieval.base import Retriever
from factrl.rewards.base import Reward, score_by_default
from factrl.train.verl.batch import ScoreBatcher
from factrl.train.verl.roles import GenerateFn, RoleError, Sampled, TokenizeFn, TokenSide, resolve
from factrl.types import Claim, Trajectory

# Sampled lives in factrl.train.verl.roles; re-exported for code importing it from here.
__all__ = [
    "Sampled",
    "TokenBudget",
    "run_token_episode",
    "agent_loop_fields",
    "shared_retriever",
]


@dataclass(frozen=True)
class TokenBudget:
    """Veri-R1: 512 tokens per model turn; ``max_response_tokens`` bounds the whole
    response (model turns + observations), verl's ``rollout.response_length``."""

    max_turn_tokens: int = 512
    max_response_tokens: int = 4096

    @property
    def episode(self) -> EpisodeBudget:
        return EpisodeBudget(max_turn_tokens=self.max_turn_tokens, max_total_tokens=self.max_response_tokens)


async def run_token_episode(
    env: Env,
    claim: Claim,
    *,
    tokenize_prompt: TokenizeFn,
    generate: GenerateFn,
    encode: Callable[[str], list[int]],
    decode: Callable[[Sequence[int]], str],
    budget: TokenBudget = TokenBudget(),
    env_in_thread: bool = True,
    reward: Reward | None = None,
    score: bool = True,
    seed: int | None = None,
    roles: Mapping[str, TokenSide] | None = None,
    scorer: ScoreBatcher | None = None,
) -> Trajectory:
    """Run one episode of ``env`` on ``claim``.

    ``generate(request)`` samples one turn for a :class:`~factrl.episode.GenerateRequest`
    (context ids, ``max_new_tokens``, stop strings, seed). ``env_in_thread`` runs ``env.step`` in a worker thread, so a
    blocking search (HTTP or an in-process index) does not stall the event loop other
    episodes share. Failures of the environment end the episode and are recorded in
    ``Trajectory.error``, as in :func:`factrl.rollout.run_episodes`. The trajectory comes
    back scored by ``reward`` (default: the environment's ``default_reward``) unless
    ``score`` is False; with ``scorer``, in a batch with other episodes' (the scorer's
    reward then applies, not ``reward``).

    ``roles`` maps each role other than the policy to its model (a request or a new
    context of a role without one raises :class:`~factrl.train.verl.roles.RoleError`);
    a failed generation of such a role ends the episode with a recorded error, as in
    the batched runner.
    """
    policy = TokenSide(generate=generate, tokenize_prompt=tokenize_prompt, encode=encode, decode=decode)
    side = resolve(policy, roles or {}, getattr(env, "name", type(env).__name__))
    ep = Episode(env, claim, budget=budget.episode, seed=seed)
    messages = ep.start()
    if messages is not None:
        opening = side(ep.contexts[0].role)
        try:
            ep.open(list(await opening.tokenize_prompt(messages)))
        except Exception as exc:
            ep.fail(f"tokenising failed: {type(exc).__name__}: {exc}")
    while (req := ep.request()) is not None:
        model = side(req.role)
        t0 = time.perf_counter()
        if req.role == POLICY:
            out = await model.generate(req)  # the rollout server's failures are verl's to handle
        else:
            try:
                out = await model.generate(req)
            except RoleError:
                raise
            except Exception as exc:
                ep.fail(f"generate failed ({req.role}): {type(exc).__name__}: {exc}")
                break
        ids = list(out.token_ids)
        text = ep.take(ids, out.logprobs, model.decode(ids), out.finish_reason, time.perf_counter() - t0)
        t1 = time.perf_counter()
        step, error = await asyncio.to_thread(safe_step, env, text) if env_in_thread else safe_step(env, text)
        need = ep.after_step(step, error, time.perf_counter() - t1)
        if need is not None:
            codec = side(need.role)
            try:
                prompt_ids = None if need.messages is None else list(await codec.tokenize_prompt(need.messages))
                ep.give(prompt_ids=prompt_ids,
                        observation_ids=None if need.observation is None else codec.encode(need.observation))
            except Exception as exc:
                ep.fail(f"tokenising failed: {type(exc).__name__}: {exc}")
    traj = ep.trajectory()
    if score:
        default = getattr(env, "default_reward", None)
        if scorer is not None:
            await scorer.score(traj, default)
        else:
            score_by_default([traj], [default], reward)
    return traj


def agent_loop_fields(traj: Trajectory, response_length: int) -> dict[str, Any]:
    """The token fields of verl's ``AgentLoopOutput`` for a trajectory.

    The response is every turn's ids in order, cut to ``response_length`` (only an
    observation can overflow: model turns are budgeted to fit); observation tokens get
    logprob 0.0, as verl pads tool responses. ``response_logprobs`` is None unless every
    model turn has logprobs. ``num_turns`` counts the prompt and every turn, as verl does.
    """
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    have_logprobs = any(t.source == "model" for t in traj.turns)
    for turn in traj.turns:
        ids += turn.token_ids
        mask += turn.mask
        if turn.source == "model" and turn.logprobs is None:
            have_logprobs = False
        logprobs += turn.logprobs if turn.logprobs is not None else [0.0] * len(turn.token_ids)
    return {
        "prompt_ids": list(traj.prompt_ids),
        "response_ids": ids[:response_length],
        "response_mask": mask[:response_length],
        "response_logprobs": logprobs[:response_length] if have_logprobs else None,
        "num_turns": 1 + len(traj.turns),
    }


_RETRIEVERS: dict[tuple[str, str], Retriever] = {}
_RETRIEVERS_LOCK = threading.Lock()


def shared_retriever(*, url: str | None = None, index: str | None = None) -> Retriever:
    """One retriever per process for a URL (factrl's HTTP retriever client) or an index
    directory (loaded in-process). verl builds a new agent loop object for every sample,
    so the retriever must outlive them: an index is loaded once, not once per rollout."""
    if (url is None) == (index is None):
        raise ValueError("give exactly one of url (a factrl retriever server) or index (an index directory)")
    key = ("url", url) if url is not None else ("index", str(index))
    with _RETRIEVERS_LOCK:
        if key not in _RETRIEVERS:
            if url is not None:
                from factrl.retrieval.client import RetrieverClient

                _RETRIEVERS[key] = RetrieverClient(url)
            else:
                from factrl.retrieval.index import load_index

                _RETRIEVERS[key] = load_index(str(index))
        return _RETRIEVERS[key]
