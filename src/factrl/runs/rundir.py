"""An evaluation run directory, read back for reports: ``run.json``, ``metrics.json`` and
``trajectories.jsonl`` (see docs/formats.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factrl.runs.info import RUN_INFO_FILE
from factrl.runs.trajectories import TRAJ_FILE, TrajectoryFileError, first_per_claim, read_trajectories
from factrl.types import Trajectory

__all__ = ["RunData", "RunDirError", "load_run", "run_names"]


class RunDirError(ValueError):
    """A path that is not a readable run directory; the message is one line."""


@dataclass
class RunData:
    """What a report shows of one run. ``trajectories`` hold the first record of each
    claim, as the metrics count them."""

    name: str
    path: Path
    info: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    trajectories: list[Trajectory] = field(default_factory=list)
    # True when metrics.json was absent (a run still going) and the metrics were
    # computed here from the trajectories.
    metrics_computed: bool = False


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object")
    return data


def _convention(info: dict[str, Any]) -> str:
    """The reward convention run.json records (``factrl eval --reward-param
    convention=...``), which the metrics follow; ``"paper"`` when none is recorded."""
    from factrl.envs.spec import parse_params

    reward = info.get("reward")
    params = reward.get("params") if isinstance(reward, dict) else None
    if isinstance(params, list):
        try:
            params = parse_params([str(p) for p in params])
        except ValueError:
            params = None
    value = params.get("convention") if isinstance(params, dict) else None
    return str(value) if value else "paper"


def load_run(path: Path, name: str | None = None) -> RunData:
    """Read a run directory; metrics come from ``metrics.json`` when present, else they are
    computed from the trajectories (a run still in progress)."""
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"{path}: not a directory")
    traj_path, metrics_path = path / TRAJ_FILE, path / "metrics.json"
    if not traj_path.exists() and not metrics_path.exists():
        raise RunDirError(f"{path}: no {TRAJ_FILE} or metrics.json (not an evaluation run directory)")
    try:
        records = read_trajectories(traj_path)
    except TrajectoryFileError as exc:
        raise RunDirError(str(exc)) from None
    # the first record of a claim counts, as in evaluate()
    trajs, _ = first_per_claim(records, {t.claim_id for t in records})
    info = _read_json(path / RUN_INFO_FILE) if (path / RUN_INFO_FILE).exists() else {}
    computed = not metrics_path.exists()
    if computed:
        from factrl.metrics.veri_r1 import compute_metrics

        metrics = compute_metrics([t for t in trajs if t.claim.label is not None], convention=_convention(info))
    else:
        metrics = _read_json(metrics_path)
    return RunData(name=name or path.resolve().name, path=path, info=info, metrics=metrics,
                   trajectories=trajs, metrics_computed=computed)


def run_names(paths: Sequence[Path]) -> list[str]:
    """Short, distinct names for runs: the directory name, with parents added while two
    runs would share one."""
    parts = [Path(p).resolve().parts for p in paths]
    depth = 1
    while True:
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names) or depth >= max(len(p) for p in parts):
            break
        depth += 1
    # Still equal (the same directory twice): number them.
    return [n if names.count(n) == 1 else f"{n} #{i + 1}" for i, n in enumerate(names)]
