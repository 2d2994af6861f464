"""Run-level metrics an agent adds to ``factrl eval`` beyond the per-episode ones.

Entries are functions ``(out_dir, trajectories, *, lms, reward) -> dict`` keyed by the
agent (environment) name; they write their own files into the run directory. ``lms``
maps roles (``"policy"``, ``"judge"``) to LMs; an entry that takes ``params``
(``factrl eval --metric-param``) registers, under the same name in
:data:`RUN_METRIC_PARAMS`, the function that checks them, so a bad one is refused before
any episode runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from factrl.registry import Registry

__all__ = ["RUN_METRICS", "RUN_METRIC_PARAMS", "check_metric_params"]

RUN_METRICS: Registry[Callable[..., dict[str, Any]]] = Registry("run metrics")
RUN_METRICS.register_lazy("rar", "factrl.metrics.rar_eval")
RUN_METRICS.register_lazy("haris", "factrl.metrics.haris_eval")
RUN_METRIC_PARAMS: Registry[Callable[..., Any]] = Registry("run metric parameters")
RUN_METRIC_PARAMS.register_lazy("rar", "factrl.metrics.rar_eval")


def check_metric_params(agent: str, params: Mapping[str, Any]) -> None:
    """ValueError unless ``agent`` has metrics of its own that accept ``params``."""
    if agent not in RUN_METRIC_PARAMS:
        raise ValueError(f"agent {agent!r} has no metrics of its own to configure")
    RUN_METRIC_PARAMS.get(agent)(params)
