"""verl's custom reward function for Veri-R1: ``compute_score`` scores one decoded
response with factrl's own parser and reward (:func:`~factrl.envs.veri_r1.parse_verdict`
+ :func:`~factrl.rewards.veri_r1.veri_r1_reward`).

Point verl at it with ``reward.custom_reward_function.path=pkg://factrl.train.verl.reward``
and ``reward.custom_reward_function.name=compute_score``.

verl decodes the whole response, which includes the ``<information>`` blocks the system
inserted. Veri-R1's format rule is that information may only appear right after a search,
so exactly the blocks that immediately follow ``</search>`` (whitespace between allowed)
are removed, together with factrl's "search budget is spent" notice that the environment
appends to the last one; any other ``<information>`` was written by the model and still
fails the format reward. When factrl's agent loop produced the response it also passes
the model's own text (``extra_info["factrl_model_text"]``), which is scored directly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from factrl.envs import prompts
from factrl.envs.veri_r1 import parse_verdict
from factrl.labels import Label, normalise_label
from factrl.rewards.veri_r1 import VeriR1RewardConfig, veri_r1_reward
from factrl.types import RewardBreakdown

__all__ = ["MODEL_TEXT_KEY", "SCORE_KEYS", "compute_score", "score_fields", "strip_system_information"]

# extra_fields key the agent loop fills with the model-only text (verl merges an agent
# loop's extra_fields into the reward function's extra_info).
MODEL_TEXT_KEY = "factrl_model_text"
SCORE_KEYS = ("score", "format", "evidence", "label", "validity", "hit_rate")

_NOTICE = re.escape(prompts.BUDGET_SPENT.strip())
# </search> (kept), then the system block; an unclosed block at the very end is a
# response cut off mid-observation and goes too.
_SYSTEM_INFO = re.compile(
    rf"(</search\s*>)\s*<information\s*>.*?(?:</information\s*>|\Z)(?:\s*{_NOTICE})?",
    flags=re.DOTALL | re.IGNORECASE,
)


def strip_system_information(response: str) -> str:
    """``response`` without the ``<information>`` blocks that follow a ``</search>``."""
    return _SYSTEM_INFO.sub(r"\1", response)


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


def _mode(extra_info: Mapping[str, Any], mode: str | None) -> str:
    """The Veri-R1 setting: an explicit argument, then factrl's ``extra_info.mode``, then
    the authors' split names (``test_off`` / ``train_online``)."""
    chosen = mode or extra_info.get("mode")
    if chosen is None:
        chosen = "offline" if "off" in str(extra_info.get("split") or "").lower() else "online"
    if chosen not in ("online", "offline"):
        raise ValueError(f"mode must be 'online' or 'offline', got {chosen!r}")
    return str(chosen)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Mapping[str, Any],
    extra_info: Mapping[str, Any] | None = None,
    *,
    mode: str | None = None,
    max_searches: int | None = None,
    reward: Mapping[str, Any] | None = None,
    reward_router_address: Any = None,
    reward_model_tokenizer: Any = None,
) -> dict[str, float]:
    """Veri-R1 reward of one response, as verl's reward managers expect it.

    ``ground_truth`` is ``{"label": ..., "evidence": [...]}`` in any label spelling;
    ``mode``, ``max_searches`` and ``reward`` (fields of
    :class:`~factrl.rewards.veri_r1.VeriR1RewardConfig`) may be set through verl's
    ``reward.custom_reward_function.reward_kwargs``. ``reward_router_address`` and
    ``reward_model_tokenizer`` are passed by verl when a reward model is configured and
    are not used. Returns ``score`` (the total) and its components; a malformed response
    scores what the formula gives it (format 0) and never raises.
    """
    del data_source, reward_router_address, reward_model_tokenizer  # part of verl's call, unused
    extra = extra_info if isinstance(extra_info, Mapping) else {}
    gold_label, gold_evidence = _ground_truth(ground_truth)
    online = _mode(extra, mode) == "online"
    model_text = extra.get(MODEL_TEXT_KEY)
    if not isinstance(model_text, str):
        model_text = strip_system_information(solution_str if isinstance(solution_str, str) else "")
    verdict = parse_verdict(model_text, online=online, max_searches=int(max_searches or extra.get("max_searches") or 3))
    breakdown = veri_r1_reward(verdict, gold_label, gold_evidence, config=VeriR1RewardConfig(**dict(reward or {})))
    return score_fields(breakdown)


def score_fields(breakdown: RewardBreakdown) -> dict[str, float]:
    """verl's reward dict for a Veri-R1 breakdown: ``score`` (the total) and the
    unweighted components, always the same keys (verl stacks them into columns)."""
    parts = breakdown.components
    out = {"score": float(breakdown.total)}
    out.update({k: float(parts.get(k, 0.0)) for k in SCORE_KEYS[1:]})
    return out
