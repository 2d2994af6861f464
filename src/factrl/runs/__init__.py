"""The run directory: its format (``run.json``, ``trajectories.jsonl``, ``metrics.json``,
reports; docs/formats.md), the lock that keeps one writer per directory, the settings
check that keeps results of different settings apart, trajectory I/O, and reading a run
back for reports. Evaluation (:mod:`factrl.evaluate`), training and the CLI write runs
through it; :mod:`factrl.report` reads them through it."""

from factrl.runs.info import RUN_INFO_FILE, RunMismatchError, check_run_info, read_run_info
from factrl.runs.lock import LOCK_FILE, RunLockedError, locks_run_dir, run_lock
from factrl.runs.rundir import RunData, RunDirError, load_run, run_names
from factrl.runs.trajectories import (TRAJ_FILE, TrajectoryFileError, append_trajectory, drop_records,
                                      first_per_claim, read_trajectories)

__all__ = [
    "LOCK_FILE",
    "RUN_INFO_FILE",
    "TRAJ_FILE",
    "RunData",
    "RunDirError",
    "RunLockedError",
    "RunMismatchError",
    "TrajectoryFileError",
    "append_trajectory",
    "check_run_info",
    "drop_records",
    "first_per_claim",
    "load_run",
    "locks_run_dir",
    "read_run_info",
    "read_trajectories",
    "run_lock",
    "run_names",
]
