"""One episode as a state machine without I/O: the drivers generate and call the
environment, the machine keeps the token truth.

Drivers (the batched one in :mod:`factrl.rollout` for evaluation and TRL, the async one
in :mod:`factrl.train.verl.episode` for verl) all run the same loop::

    messages = ep.start()                        # env.reset; None if it failed
    if messages: ep.open(prompt_ids)             # the driver tokenises (chat template)
    while (req := ep.request()) is not None:     # role, context ids, budget, stops, seed
        text = ep.take(sampled_ids, logprobs, text, finish_reason, seconds)
        need = ep.after_step(*safe_step(ep.env, text))
        if need: ep.give(...)                    # the driver tokenises the observation
    traj = ep.trajectory()                       #   and any new context's prompt

Token discipline: a context's prompt ids come from the chat template once; model turns
keep the ids exactly as sampled (mask 1, with their logprobs); observations are encoded
once and appended with mask 0; model text is never re-tokenised.

Budgets are per episode and per context, never per batch: a turn may generate at most
``max_turn_tokens`` and a context's turns (model and observation) at most
``max_total_tokens`` after its prompt, so an episode's trajectory does not depend on
which other episodes share its batch. An environment may set a role's own temperature
and limits (:class:`~factrl.envs.base.RoleSampling`); the request carries them. A seeded run derives each turn's sampling seed
from the claim, the group member and the turn number, for the same reason.

Contexts: the environment may ask (with a :class:`~factrl.envs.base.Switch`) for the next
generation as another role, on fresh messages or back on that role's latest context.
The first context is the trajectory's ``prompt``/``turns``; every other one becomes a
:class:`~factrl.types.Segment` with its own prompt, turns and masks.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from factrl.envs.base import POLICY, Env, StepResult, role_sampling
from factrl.types import Claim, Message, Segment, Trajectory, Turn, Verdict

__all__ = [
    "EpisodeBudget",
    "GenerateRequest",
    "Need",
    "Episode",
    "model_turn",
    "observation_turn",
    "safe_step",
    "turn_seed",
]


@dataclass(frozen=True)
class EpisodeBudget:
    """Veri-R1: 512 tokens per model turn; ``max_total_tokens`` bounds one context's
    model turns and observations after its prompt (verl's ``response_length``)."""

    max_turn_tokens: int = 512
    max_total_tokens: int = 4096


@dataclass(frozen=True)
class GenerateRequest:
    """What the driver must generate next for one episode."""

    role: str
    context: list[int]
    max_new_tokens: int
    stop: tuple[str, ...]
    seed: int | None
    meta: dict[str, object]
    temperature: float | None = None  # the role's own (RoleSampling); None: the rollout's


@dataclass(frozen=True)
class Need:
    """Text the driver must tokenise with the LM of ``role``: chat ``messages`` opening a
    new context (``chat_prompt_ids``) and/or an ``observation`` (``encode``)."""

    role: str
    messages: list[Message] | None = None
    observation: str | None = None


@dataclass
class _Context:
    role: str
    prompt: list[Message]
    stop: tuple[str, ...]
    prompt_ids: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)

    @property
    def used(self) -> int:
        return sum(len(t.token_ids) for t in self.turns)

    def ids(self) -> list[int]:
        return self.prompt_ids + [t for turn in self.turns for t in turn.token_ids]


def turn_seed(seed: int, claim_id: str, group_index: int, turn: int) -> int:
    """A sampling seed for one model turn of one episode, independent of batching."""
    digest = hashlib.blake2b(f"{seed}|{claim_id}|{group_index}|{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


class Episode:
    """The state of one episode of ``env`` on ``claim``; see the module docstring."""

    def __init__(
        self,
        env: Env,
        claim: Claim,
        *,
        group_index: int = 0,
        budget: EpisodeBudget = EpisodeBudget(),
        seed: int | None = None,
    ) -> None:
        self.env, self.claim, self.group_index = env, claim, group_index
        self.budget, self.seed = budget, seed
        self.contexts: list[_Context] = []
        self.current = 0
        self.done = False
        self.error: str | None = None
        self.model_turns = 0
        self.gen_seconds = self.env_seconds = 0.0
        self.started = time.perf_counter()
        self._pending: Need | None = None

    # -- start -----------------------------------------------------------------------
    def start(self) -> list[Message] | None:
        """Reset the environment; returns the opening messages to tokenise, or None when
        the reset failed (a bad claim or set-up: recorded, the episode is over)."""
        try:
            messages = self.env.reset(self.claim)
        except Exception as exc:
            return self._fail(f"reset failed: {type(exc).__name__}: {exc}")
        self.contexts = [_Context(POLICY, list(messages), tuple(self.env.stop))]
        return self.contexts[0].prompt

    def open(self, prompt_ids: Sequence[int]) -> None:
        """The opening context's prompt ids (after :meth:`start`)."""
        if not prompt_ids:
            self._fail("reset failed: the prompt has no tokens")
            return
        self.contexts[0].prompt_ids = [int(i) for i in prompt_ids]

    def fail(self, error: str) -> None:
        """End the episode with a recorded error (e.g. the driver could not tokenise)."""
        self._fail(error)

    # -- loop ------------------------------------------------------------------------
    def request(self) -> GenerateRequest | None:
        """The next generation, or None when the episode is over."""
        if self.done:
            return None
        if self._pending is not None:
            raise RuntimeError("give() the tokens of the last step's Need before the next request")
        ctx = self.contexts[self.current]
        own = role_sampling(self.env, ctx.role)
        room = (own.max_context_tokens or self.budget.max_total_tokens) - ctx.used
        if room <= 0:
            self.done = True  # the context is full: the environment never got its answer
            return None
        seed = None if self.seed is None else turn_seed(self.seed, self.claim.id, self.group_index, self.model_turns)
        return GenerateRequest(
            role=ctx.role,
            context=ctx.ids(),
            max_new_tokens=min(own.max_new_tokens or self.budget.max_turn_tokens, room),
            stop=ctx.stop,
            seed=seed,
            temperature=own.temperature,
            # which episode, context (0: the opening one) and turn of that context a row
            # is: scripted teachers answer from this, never by parsing the prompt
            meta={"claim_id": self.claim.id, "group_index": self.group_index, "role": ctx.role,
                  "context": self.current, "context_turn": sum(t.source == "model" for t in ctx.turns)},
        )

    def take(
        self,
        token_ids: Sequence[int],
        logprobs: Sequence[float] | None,
        text: str,
        finish_reason: str | None,
        seconds: float = 0.0,
    ) -> str:
        """Record one generated turn exactly as sampled; returns the text for ``env.step``."""
        ids = list(token_ids)
        self.contexts[self.current].turns.append(model_turn(ids, logprobs, text, finish_reason, seconds))
        self.gen_seconds += seconds
        self.model_turns += 1
        return text

    def after_step(self, step: StepResult | None, error: str | None, seconds: float = 0.0) -> Need | None:
        """Apply the environment's answer to the last turn. Returns what the driver must
        tokenise before the next :meth:`request` (None when nothing)."""
        self.env_seconds += seconds
        empty = not self.contexts[self.current].turns[-1].token_ids
        if error is not None or step is None:
            self._fail(error or "env step returned nothing")
            return None
        if step.done or empty:
            # An empty generation would repeat forever: the episode ends with it.
            self.done = True
            return None
        sw = step.switch
        role = self.contexts[self.current].role
        if sw is not None and sw.messages is not None:
            self.contexts.append(_Context(sw.role, list(sw.messages), tuple(sw.stop or self.env.stop)))
            self.current = len(self.contexts) - 1
            role = sw.role
        elif sw is not None:
            latest = [i for i, c in enumerate(self.contexts) if c.role == sw.role]
            if not latest:
                self._fail(f"env step failed: switch back to role {sw.role!r}, which has no context")
                return None
            self.current, role = latest[-1], sw.role
            if sw.stop is not None:
                self.contexts[self.current].stop = tuple(sw.stop)
        if self.model_turns >= self.env.max_turns + 1:
            self.done = True  # the env should have ended the episode; never loop past its budget
            return None
        opening = self.contexts[self.current].prompt if not self.contexts[self.current].prompt_ids else None
        if opening is None and not step.observation:
            return None
        self._pending = Need(role=role, messages=opening, observation=step.observation or None)
        return self._pending

    def give(self, *, prompt_ids: Sequence[int] | None = None, observation_ids: Sequence[int] | None = None) -> None:
        """The tokens of the last :class:`Need`."""
        need, self._pending = self._pending, None
        if need is None:
            raise RuntimeError("give() without a pending Need")
        ctx = self.contexts[self.current]
        if need.messages is not None:
            if not prompt_ids:
                self._fail(f"the {need.role!r} context's prompt has no tokens")
                return
            ctx.prompt_ids = [int(i) for i in prompt_ids]
        if need.observation is not None:
            ctx.turns.append(observation_turn(need.observation, list(observation_ids or [])))

    # -- end -------------------------------------------------------------------------
    def trajectory(self) -> Trajectory:
        """The finished episode (the verdict from ``env.result``; not scored yet)."""
        first = self.contexts[0] if self.contexts else None
        traj = Trajectory(
            claim_id=self.claim.id,
            env=getattr(self.env, "name", type(self.env).__name__),
            claim=self.claim,
            prompt=first.prompt if first and first.prompt_ids else [],
            prompt_ids=first.prompt_ids if first else [],
            turns=first.turns if first else [],
            group_index=self.group_index,
            error=self.error,
            segments=[Segment(role=c.role, prompt=c.prompt, prompt_ids=c.prompt_ids, turns=c.turns)
                      for c in self.contexts[1:]],
        )
        if traj.prompt:
            _collect_result(self.env, traj)
        traj.timings.update(
            generate_s=self.gen_seconds, env_s=self.env_seconds, total_s=time.perf_counter() - self.started
        )
        traj.meta["completion_tokens"] = sum(
            len(t.token_ids) for c in self.contexts for t in c.turns if t.source == "model"
        )
        return traj

    def _fail(self, error: str) -> None:
        self.error = self.error or error
        self.done = True
        self._pending = None


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


def observation_turn(text: str, ids: Sequence[int] | Callable[[str], list[int]]) -> Turn:
    """Environment text, encoded once, appended with mask 0 (``ids`` or an encoder)."""
    ids = list(ids(text)) if callable(ids) else list(ids)
    return Turn(source="env", text=text, token_ids=ids, mask=[0] * len(ids))


def safe_step(env: Env, text: str) -> tuple[StepResult | None, str | None]:
    """``env.step`` with failures (e.g. a retriever timing out) turned into an error
    string that ends the episode, rather than an exception that ends the batch."""
    try:
        return env.step(text), None
    except Exception as exc:
        return None, f"env step failed: {type(exc).__name__}: {exc}"


def _collect_result(env: Env, traj: Trajectory) -> None:
    """Copy the env's verdict, searches, timings and meta into ``traj``."""
    try:
        res = env.result()
        traj.verdict = res.verdict
        traj.searches = res.searches
        traj.retrieved_ids = res.retrieved_ids
        traj.timings.update(res.timings)
        traj.meta.update(res.meta)
    except Exception as exc:
        traj.error = traj.error or f"result failed: {type(exc).__name__}: {exc}"
        traj.verdict = Verdict(format_ok=False, format_errors=[traj.error])
