"""Evaluation runs that stream results to disk and resume after a crash.

A run directory holds ``run.json`` (what was run), ``trajectories.jsonl`` (one line per
finished claim, appended and flushed as batches finish), ``metrics.json`` and
``report.md``. Re-running the same command skips the claims already in
``trajectories.jsonl``; a line cut short by a crash is discarded and redone.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from factrl.envs.base import Env
from factrl.lm.base import LM
from factrl.rewards.base import Reward
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, Trajectory

__all__ = ["evaluate", "read_trajectories", "RunMismatchError"]

TRAJ_FILE = "trajectories.jsonl"


class RunMismatchError(ValueError):
    """The run directory holds results of a different configuration."""


def read_trajectories(path: Path, *, repair: bool = False) -> list[Trajectory]:
    """Read a trajectories file; a torn last line (crash mid-write) is dropped and, with
    ``repair``, cut from the file so appends continue cleanly. Corruption elsewhere is an
    error naming the line."""
    if not path.exists():
        return []
    out: list[Trajectory] = []
    good_bytes = 0
    with path.open("rb") as fh:
        lines = fh.readlines()
    for i, raw in enumerate(lines, 1):
        try:
            out.append(Trajectory.model_validate_json(raw))
            good_bytes += len(raw)
        except ValueError as exc:
            if i == len(lines):  # torn tail from an interrupted write
                if repair:
                    with path.open("r+b") as fh:
                        fh.truncate(good_bytes)
                break
            raise ValueError(f"{path}:{i}: not a trajectory record ({exc})") from None
    if repair and lines and not lines[-1].endswith(b"\n") and good_bytes == sum(map(len, lines)):
        with path.open("ab") as fh:  # complete record missing its newline
            fh.write(b"\n")
    return out


def evaluate(
    claims: Sequence[Claim],
    make_env: Callable[[], Env],
    lm: LM,
    out_dir: Path,
    *,
    rollout: RolloutConfig | None = None,
    run_info: dict[str, Any] | None = None,
    progress: bool = True,
    force: bool = False,
    reward: Reward | None = None,
) -> dict[str, Any]:
    """Verify every claim once, streaming trajectories scored by ``reward`` (default: the
    environment's own); returns the metrics dict that is also written to ``metrics.json``."""
    from factrl.metrics.veri_r1 import compute_metrics
    from factrl.report.markdown import format_summary_line, metrics_markdown

    rollout = rollout or RolloutConfig()
    if rollout.group != 1:
        raise ValueError("evaluation runs one episode per claim (group=1)")
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"claim ids must be unique; {dup!r} appears more than once")
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_run_info(out_dir / "run.json", run_info or {}, force=force)

    path = out_dir / TRAJ_FILE
    done = {t.claim_id for t in read_trajectories(path, repair=True)}
    todo = [c for c in claims if c.id not in done]
    total, t_start = len(claims), time.perf_counter()
    if progress and done:
        _say(f"resuming: {len(done)} of {total} claims already done")

    finished = len(done)
    with path.open("a", encoding="utf-8") as fh:

        def write(traj: Trajectory) -> None:
            nonlocal finished
            fh.write(traj.model_dump_json() + "\n")
            fh.flush()
            finished += 1

        for start in range(0, len(todo), rollout.batch_size):
            batch = todo[start : start + rollout.batch_size]
            run_episodes(make_env, batch, lm, rollout, on_trajectory=write, reward=reward)
            os.fsync(fh.fileno())
            if progress:
                rate = (time.perf_counter() - t_start) / max(1, finished - len(done))
                _say(f"[{finished}/{total}] {rate:.1f} s/claim")

    wanted = set(ids)
    trajs = [t for t in read_trajectories(path) if t.claim_id in wanted]
    metrics = compute_metrics(trajs)
    wall = time.perf_counter() - t_start
    n_new = finished - len(done)
    # Throughput (episodes run in parallel batches) and per-episode latency differ.
    metrics["seconds_per_claim"] = wall / n_new if n_new else None
    lat = [t.timings.get("total_s", 0.0) for t in trajs]
    metrics["episode_latency_s"] = sum(lat) / len(lat) if lat else None
    metrics["wall_seconds_this_run"] = wall
    metrics["claims_this_run"] = n_new
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    title = f"Evaluation: {run_info.get('dataset', 'claims') if run_info else 'claims'}"
    (out_dir / "report.md").write_text(metrics_markdown(metrics, title=title))
    if progress:
        _say(format_summary_line(metrics))
    return metrics


def _check_run_info(path: Path, info: dict[str, Any], *, force: bool) -> None:
    """Refuse to mix results of different settings in one run directory."""
    if path.exists() and not force:
        old = json.loads(path.read_text())
        keys = set(old) | set(info)
        diff = {k: (old.get(k), info.get(k)) for k in keys if k != "limit" and old.get(k) != info.get(k)}
        if diff:
            lines = ", ".join(f"{k}: {a!r} → {b!r}" for k, (a, b) in sorted(diff.items()))
            raise RunMismatchError(
                f"{path.parent} holds a run with other settings ({lines}); "
                "use another --out directory or --force"
            )
    path.write_text(json.dumps(info, indent=2, default=str) + "\n")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
