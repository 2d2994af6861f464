"""A run's trajectories file (``trajectories.jsonl``, one :class:`~factrl.types.Trajectory`
per line, appended as episodes finish; see docs/formats.md): reading it back after a
crash, counting each claim once, dropping records to run them again."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from factrl.types import Trajectory

__all__ = ["TRAJ_FILE", "TrajectoryFileError", "append_trajectory", "drop_records", "first_per_claim",
           "read_trajectories"]

TRAJ_FILE = "trajectories.jsonl"


class TrajectoryFileError(ValueError):
    """A line of a trajectories file that is not a trajectory record; the message is one
    line, ``FILE:LINE: reason``, fit for a CLI error."""

    def __init__(self, path: Path, line: int, exc: Exception) -> None:
        super().__init__(f"{path}:{line}: not a trajectory record ({_first_line(exc)})")
        self.path, self.line = path, line


def _first_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)  # pydantic: name the first bad field, briefly
    if callable(errors):
        try:
            first = errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ()))
            return f"{where}: {first['msg']}" if where else str(first["msg"])
        except (IndexError, KeyError, TypeError):
            pass
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


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
            raise TrajectoryFileError(path, i, exc) from None
    if repair and lines and not lines[-1].endswith(b"\n") and good_bytes == sum(map(len, lines)):
        with path.open("ab") as fh:  # complete record missing its newline
            fh.write(b"\n")
    return out


def first_per_claim(trajs: Sequence[Trajectory], wanted: set[str]) -> tuple[list[Trajectory], int]:
    """The first record of each wanted claim id, in file order, and how many later
    records of the same ids were dropped (metrics must count each claim once)."""
    seen: set[str] = set()
    out: list[Trajectory] = []
    for t in trajs:
        if t.claim_id in wanted and t.claim_id not in seen:
            seen.add(t.claim_id)
            out.append(t)
    return out, sum(1 for t in trajs if t.claim_id in wanted) - len(out)


def drop_records(path: Path, claim_ids: set[str]) -> None:
    """Rewrite ``path`` (already repaired) without the records of ``claim_ids``, atomically:
    a crash leaves either file, and either way those claims are run again."""
    kept = [raw for raw in path.read_bytes().splitlines(keepends=True)
            if raw.strip() and json.loads(raw)["claim_id"] not in claim_ids]
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        fh.write(b"".join(kept))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def append_trajectory(fh: IO[str], traj: Trajectory) -> None:
    """One record, flushed (a crash loses at most the line being written)."""
    fh.write(traj.model_dump_json() + "\n")
    fh.flush()
