"""verl's custom reward function: ``compute_score`` scores one decoded response with
factrl's own scoring stage — the environment's ``parse_verdict`` on the model's text,
then the registered reward (the environment's default, Veri-R1's for Veri-R1) — so verl,
evaluation and the TRL adapter score alike.

Point verl at it with ``reward.custom_reward_function.path=pkg://factrl.train.verl.reward``
and ``reward.custom_reward_function.name=compute_score``; ``reward_kwargs`` may name the
environment (``env``, ``env_params``) and the reward (``reward``, ``reward_params``).

verl decodes the whole response, which includes the ``<information>`` blocks the system
inserted. Veri-R1's format rule is that information may only appear right after a search,
so exactly the blocks that immediately follow ``</search>`` (whitespace between allowed)
are removed, together with factrl's "search budget is spent" notice that the environment
appends to the last one; any other ``<information>`` was written by the model and still
fails the format reward. When factrl's agent loop produced the response it also passes
the model's own text (``extra_info["factrl_model_text"]``), which is scored directly.

The trajectory handed to the reward carries the environment's typed outcome
(:mod:`factrl.envs.outcome`: the verdict and, e.g., Binary RAR's response or a HARIS
search agent's report), and keeps the whole response as turns (model text, and
the system's blocks as environment turns): the Veri-R1 reward's ``authors_code``
convention reads it as the authors' code read verl's decoded response.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from factrl.envs import DEFAULT_AGENT, ENVS, EnvDeps, EnvSpec, build
from factrl.envs import prompts
from factrl.labels import Label, normalise_label
from factrl.envs.outcome import OutcomeError, missing_fields, outcome_of
from factrl.rewards.base import RewardDeps, RewardSpec, build_reward
from factrl.rewards.veri_r1 import VeriR1Reward
from factrl.types import Claim, EvidenceRef, RewardBreakdown, Trajectory, Turn

__all__ = [
    "MODEL_TEXT_KEY",
    "SCORE_KEYS",
    "compute_score",
    "response_turns",
    "score_fields",
    "strip_system_information",
]

# extra_fields key the agent loop fills with the model-only text (verl merges an agent
# loop's extra_fields into the reward function's extra_info).
MODEL_TEXT_KEY = "factrl_model_text"
# The fields of the Veri-R1 reward (any reward gives "score" and its declared components).
SCORE_KEYS = ("score", *VeriR1Reward.components)

_NOTICE = '(?:' + '|'.join(re.escape(n.strip()) for n in prompts.BUDGET_SPENT_NOTICES) + ')'
# </search> (kept), then the system block; an unclosed block at the very end is a
# response cut off mid-observation and goes too.
_SYSTEM_INFO = re.compile(
    rf"(</search\s*>)\s*<information\s*>.*?(?:</information\s*>|\Z)(?:\s*{_NOTICE})?",
    flags=re.DOTALL | re.IGNORECASE,
)


def strip_system_information(response: str) -> str:
    """``response`` without the ``<information>`` blocks that follow a ``</search>``."""
    return _SYSTEM_INFO.sub(r"\1", response)


def response_turns(response: str) -> list[Turn]:
    """``response`` as turns: the system's blocks (those :func:`strip_system_information`
    removes) as environment turns, the rest as model turns; no token ids (verl holds
    them). The turns' texts join back into ``response``."""
    turns: list[Turn] = []
    pos = 0
    for m in _SYSTEM_INFO.finditer(response):
        cut = m.end(1)
        turns.append(Turn(source="model", text=response[pos:cut], token_ids=[], mask=[]))
        turns.append(Turn(source="env", text=response[cut : m.end()], token_ids=[], mask=[]))
        pos = m.end()
    if pos < len(response) or not turns:
        turns.append(Turn(source="model", text=response[pos:], token_ids=[], mask=[]))
    return turns


def _ground_truth(ground_truth: Any) -> tuple[Label, list[str]]:
    if isinstance(ground_truth, (str, bytes)):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            raise ValueError(f"ground_truth is a string but not JSON: {str(ground_truth)[:80]!r}") from None
    if not isinstance(ground_truth, Mapping):
        raise ValueError(f"ground_truth must be a mapping with 'label' and 'evidence', got {type(ground_truth).__name__}")
    if ground_truth.get("label") is None:
        raise ValueError(f"ground_truth has no label: {dict(ground_truth)!r}")
    evidence = ground_truth.get("evidence")
    if evidence is None:
        ids: list[str] = []
    elif isinstance(evidence, (str, bytes)):
        raise ValueError(f"ground_truth evidence must be a list of ids, got the string {evidence!r}")
    else:
        ids = [str(e) for e in evidence]  # a list, or the numpy array verl hands over
    return normalise_label(ground_truth["label"]), ids


def _env_spec(extra: Mapping[str, Any], env: str | None, env_params: Mapping[str, Any] | None,
              mode: str | None, max_searches: int | None) -> EnvSpec:
    """The environment that produced the response, under its one registry name
    (:func:`factrl.components.resolve_agent`): ``reward_kwargs`` first (the deprecated
    ``mode`` and the ``max_searches`` shorthand under an explicit ``env_params``), then
    what ``factrl export verl`` recorded in ``extra_info``, then the environment's own
    reading of foreign rows (e.g. the Veri-R1 authors' split names)."""
    from factrl.components import mode_alias, resolve_agent

    name = env or extra.get("env") or DEFAULT_AGENT
    params: dict[str, Any] = {}
    row_params = getattr(ENVS.get(name), "row_params", None)
    if row_params is not None:
        params.update(row_params(extra))
    if extra.get("env_params"):
        params.update(json.loads(extra["env_params"]))
    given = mode_alias(env_params or {}, mode, where="the verl reward (reward_kwargs)")
    if max_searches is not None:
        given.setdefault("max_searches", max_searches)
    return resolve_agent(EnvSpec(name=name, params={**params, **given}))


def _claim(ground_truth: Any, extra: Mapping[str, Any]) -> Claim:
    label, evidence = _ground_truth(ground_truth)
    if extra.get("claim"):
        claim = Claim.model_validate_json(extra["claim"])
        return claim.model_copy(update={"label": label, "evidence": [EvidenceRef(id=e) for e in evidence]})
    return Claim(id=str(extra.get("claim_id") or extra.get("index") or "verl"), text="(not recorded)",
                 label=label, evidence=[EvidenceRef(id=e) for e in evidence])


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Mapping[str, Any],
    extra_info: Mapping[str, Any] | None = None,
    *,
    env: str | None = None,
    env_params: Mapping[str, Any] | None = None,
    reward: str | Mapping[str, Any] | None = None,
    reward_params: Mapping[str, Any] | None = None,
    mode: str | None = None,
    max_searches: int | None = None,
    reward_router_address: Any = None,
    reward_model_tokenizer: Any = None,
    reward_deps: RewardDeps | None = None,
) -> dict[str, float]:
    """The reward of one response, as verl's reward managers expect it.

    ``ground_truth`` is ``{"label": ..., "evidence": [...]}`` in any label spelling.
    ``env``/``env_params`` name the environment whose protocol the response follows
    (``max_searches`` is a shorthand for Veri-R1's parameter; ``mode`` is a deprecated
    alias of ``env_params={"mode": ...}``, warned about once); ``reward``
    is a reward name (default: the environment's) or, as a mapping, that reward's
    parameters (e.g. :class:`~factrl.rewards.veri_r1.VeriR1RewardConfig` fields), as is
    ``reward_params``. ``reward_router_address`` and ``reward_model_tokenizer`` are passed
    by verl when a reward model is configured and are not used; ``reward_deps`` gives a
    reward its LMs (a verifier, a judge) when called from Python. The trajectory scored
    carries the environment's typed outcome (:func:`~factrl.envs.outcome.outcome_of`);
    a reward that reads fields the environment cannot recover from text is refused
    (:class:`~factrl.envs.outcome.OutcomeError`) instead of scored differently. Returns ``score`` (the
    total) and the reward's declared components; a malformed response scores what the
    reward gives it and never raises.
    """
    del data_source, reward_router_address, reward_model_tokenizer  # part of verl's call, unused
    extra = extra_info if isinstance(extra_info, Mapping) else {}
    claim = _claim(ground_truth, extra)
    the_env = build(_env_spec(extra, env, env_params, mode, max_searches), EnvDeps.offline_only())
    response = solution_str if isinstance(solution_str, str) else ""
    model_text = extra.get(MODEL_TEXT_KEY)
    if not isinstance(model_text, str):
        model_text = strip_system_information(response)
    name = reward if isinstance(reward, str) else the_env.default_reward
    params = {**(dict(reward) if isinstance(reward, Mapping) else {}), **dict(reward_params or {})}
    scorer = build_reward(RewardSpec(name=name, params=params), reward_deps)
    # The environment's typed outcome (verdict and the fields its rewards read), as the
    # episode itself would have recorded it.
    outcome = outcome_of(the_env, model_text, claim)
    meta = outcome.meta()
    if missing := missing_fields(scorer, meta):
        raise OutcomeError(
            f"reward {name!r} reads {', '.join(missing)} of an episode, which environment {the_env.name!r} "
            f"cannot recover from the response text; score these episodes where they run (evaluate, the agent loop)"
        )
    traj = Trajectory(claim_id=claim.id, env=the_env.name, claim=claim, prompt=[],
                      turns=response_turns(response), verdict=outcome.verdict, meta=meta)
    (breakdown,) = scorer.score([traj])
    return score_fields(breakdown, scorer.components)


def score_fields(breakdown: RewardBreakdown, components: Sequence[str] = SCORE_KEYS[1:]) -> dict[str, float]:
    """verl's reward dict: ``score`` (the total) and the declared components, always the
    same keys for one reward (verl stacks them into columns)."""
    parts = breakdown.components
    out = {"score": float(breakdown.total)}
    out.update({k: float(parts.get(k, 0.0)) for k in components})
    return out
