"""Run-level metrics an agent adds to ``factrl eval`` beyond the per-episode ones.

Entries are functions ``(out_dir, trajectories, *, lms, reward) -> dict`` keyed by the
agent (environment) name; they write their own files into the run directory. ``lms``
maps roles (``"policy"``, ``"judge"``) to LMs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from factrl.registry import Registry

__all__ = ["RUN_METRICS"]

RUN_METRICS: Registry[Callable[..., dict[str, Any]]] = Registry("run metrics")
RUN_METRICS.register_lazy("rar", "factrl.metrics.rar_eval")
