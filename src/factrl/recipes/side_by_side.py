"""GRPO runs of one recipe side by side: the real run and its controls each train and
evaluate in their own process, the CPU's cores split between them.

A 135M model's kernels do not use a second thread fully, so on a small CPU two
one-thread processes finish a run and its control sooner than one two-thread process
doing them in turn: the slow learning test's 12-update offline recipe took 8.6 minutes for
both runs' GRPO and evaluation side by side on the idle 2-core box, against 10.1 and
11.5 one after the other on two threads (docs/benchmarks.md). Each process is
``factrl train factworld --from OUT/recipe.json --out OUT --stage ... --run NAME`` — the
same resumable stages a user would start by hand — with ``OMP_NUM_THREADS`` set to its
share. bf16 sums depend on the thread count, so a run's figures can differ by a claim or
so from the same run on all cores (float32's do not).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["run_side_by_side", "threads_each"]


def threads_each(runs: int, cores: int | None = None) -> int:
    """Torch threads per process when ``runs`` processes share ``cores`` (default: the CPUs
    this process may use, or ``OMP_NUM_THREADS`` when set)."""
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if cores is None:
        env = os.environ.get("OMP_NUM_THREADS", "")
        cores = int(env) if env.isdigit() and int(env) > 0 else len(os.sched_getaffinity(0))
    return max(1, cores // runs)


def run_side_by_side(out: Path, runs: tuple[str, ...], stages: tuple[str, ...], *,
                     threads: int | None = None) -> dict[str, float]:
    """Run ``stages`` (of grpo, eval) of each named run in its own process, all at once;
    returns ``{"side-by-side": seconds}``. A process that fails is a ``RuntimeError``
    naming the run and its exit status, raised after every process has ended (what the
    others finished is on disk; running the recipe again resumes)."""
    bad = [s for s in stages if s not in ("grpo", "eval")]
    if bad or not stages:
        raise ValueError(f"side-by-side runs take the grpo and eval stages, got {', '.join(stages) or 'none'}")
    recipe = Path(out) / "recipe.json"
    if not recipe.is_file():
        raise FileNotFoundError(f"{recipe}: the recipe's record is written before its runs start")
    n = threads or threads_each(len(runs))
    import factrl

    src = str(Path(factrl.__file__).resolve().parents[1])  # the children import this factrl
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n), "PYTHONPATH": path}
    t0 = time.perf_counter()
    procs = {}
    for name in runs:
        cmd = [sys.executable, "-m", "factrl", "train", "factworld", "--from", str(recipe), "--out", str(out)]
        for s in stages:
            cmd += ["--stage", s]
        procs[name] = subprocess.Popen([*cmd, "--run", name], env=env)  # noqa: S603 (our own CLI)
        print(f"[factworld] run {name}: process {procs[name].pid}, {n} thread(s)", file=sys.stderr, flush=True)
    codes = {name: p.wait() for name, p in procs.items()}
    failed = [f"{name} (exit {code})" for name, code in codes.items() if code != 0]
    if failed:
        raise RuntimeError(f"side-by-side run(s) failed: {', '.join(failed)}; run the recipe again to resume")
    return {"side-by-side": round(time.perf_counter() - t0, 1)}
