"""A run's settings (``run.json``): written on every invocation, compared with the
settings a run directory already holds so results of different settings never mix."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["RUN_INFO_FILE", "RunMismatchError", "check_run_info", "read_run_info", "write_json_atomic"]

RUN_INFO_FILE = "run.json"
# run.json keys that may change between a run and its resumption.
# metric_params only shape the agent's own metrics, recomputed from the trajectories on
# every invocation: a resumption may re-score a finished run with other ones.
# Where a run goes on (device, episodes and rows per forward pass) is no setting of its
# results: each row samples with its own seed whatever shares its batch. Its dtype is.
# Keys and values kept between turns (turn_cache_gb) change fp32 results by nothing and bf16
# ones by rounding, as another CPU's kernels do: a run interrupted before the cache existed
# resumes with it. So does float32 attention over a float32 cache for a bf16 CPU model
# (cpu_attention): bf16 rounding of the attention's arithmetic, no other computation.
_VOLATILE_INFO = frozenset({"limit", "skipped_rows", "metric_params", "device", "batch_size", "max_batch_size",
                            "turn_cache_gb", "cpu_attention"})
# What a run recorded before the key existed: every earlier local run was float32.
_ABSENT_INFO = {"dtype": "float32"}


def _canonical(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` with its agent under the environment's one registry name, so a run recorded
    under an alias (``veri_r1_offline``, before runs recorded ``veri_r1`` with
    ``mode=offline``) resumes under the canonical record."""
    agent = info.get("agent")
    if not (isinstance(agent, dict) and isinstance(agent.get("name"), str)):
        return info
    from factrl.envs.base import canonical_agent

    name, params = canonical_agent(agent["name"], agent.get("params") or {})
    return {**info, "agent": {**agent, "name": name, "params": params}}


class RunMismatchError(ValueError):
    """The run directory holds results of a different configuration."""


def check_run_info(path: Path, info: dict[str, Any], *, force: bool) -> None:
    """Refuse to mix results of different settings in one run directory."""
    if path.exists() and not force:
        old = json.loads(path.read_text())
        old, new = {**_ABSENT_INFO, **_canonical(old)}, {**_ABSENT_INFO, **_canonical(info)}
        keys = set(old) | set(new)
        diff = {k: (old.get(k), new.get(k)) for k in keys if k not in _VOLATILE_INFO and old.get(k) != new.get(k)}
        if diff:
            lines = ", ".join(f"{k}: {a!r} → {b!r}" for k, (a, b) in sorted(diff.items()))
            raise RunMismatchError(
                f"{path.parent} holds a run with other settings ({lines}); "
                "use another --out directory or --force"
            )
    path.write_text(json.dumps(info, indent=2, default=str) + "\n")


def read_run_info(run_dir: Path) -> dict[str, Any]:
    """The settings ``run_dir`` records (``{}`` when it records none)."""
    path = Path(run_dir) / RUN_INFO_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON so that a concurrent reader (another process of the
    same run) sees the old file or the new one, never a half-written one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
