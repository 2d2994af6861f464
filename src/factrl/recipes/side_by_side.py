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

Each process holds its own model, optimiser and rollouts (peak RSS 8-11 GB for the CPU
recipes on the embedded model: HARIS's is the largest), so no more start at once than the
memory available holds (:func:`at_once`); the others wait for one to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["RUN_MEMORY_GB", "at_once", "available_memory_gb", "run_side_by_side", "threads_each"]

# The memory one recipe process may take at its peak (GB): runs/ht's HARIS recipe, 10.9 GB
# RSS on the 2-core box; $FACTRL_RUN_MEMORY_GB overrides it.
RUN_MEMORY_GB = 11.0


def threads_each(runs: int, cores: int | None = None) -> int:
    """Torch threads per process when ``runs`` processes share ``cores`` (default: the CPUs
    this process may use, or ``OMP_NUM_THREADS`` when set)."""
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if cores is None:
        env = os.environ.get("OMP_NUM_THREADS", "")
        cores = int(env) if env.isdigit() and int(env) > 0 else len(os.sched_getaffinity(0))
    return max(1, cores // runs)


def available_memory_gb() -> float | None:
    """The memory the kernel says new processes can take now (``MemAvailable``), in GB;
    None where ``/proc/meminfo`` does not say (not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024**2  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def at_once(runs: int, *, available_gb: float | None = None, per_run_gb: float | None = None) -> int:
    """How many of ``runs`` processes start at once: all, unless the memory available
    (``available_gb``, default :func:`available_memory_gb`) does not hold that many at
    ``per_run_gb`` each (default ``$FACTRL_RUN_MEMORY_GB``, else :data:`RUN_MEMORY_GB`);
    never fewer than one."""
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if per_run_gb is None:
        raw = os.environ.get("FACTRL_RUN_MEMORY_GB", "").strip()
        try:
            per_run_gb = float(raw) if raw else RUN_MEMORY_GB
        except ValueError:
            raise ValueError(f"FACTRL_RUN_MEMORY_GB must be a number of GB, got {raw!r}") from None
    if per_run_gb <= 0:
        return runs
    if available_gb is None:
        available_gb = available_memory_gb()
    if available_gb is None:
        return runs
    return max(1, min(runs, int(available_gb // per_run_gb)))


def run_side_by_side(out: Path, runs: tuple[str, ...], stages: tuple[str, ...], *,
                     threads: int | None = None, max_at_once: int | None = None) -> dict[str, float]:
    """Run ``stages`` (of grpo, eval) of each named run in its own process, as many at once
    as the memory holds (``max_at_once``, default :func:`at_once`), the rest each as one
    ends; returns ``{"side-by-side": seconds}``. A process that fails is a
    ``RuntimeError`` naming the run and its exit status, raised after every process has
    ended (what the others finished is on disk; running the recipe again resumes)."""
    bad = [s for s in stages if s not in ("grpo", "eval")]
    if bad or not stages:
        raise ValueError(f"side-by-side runs take the grpo and eval stages, got {', '.join(stages) or 'none'}")
    recipe = Path(out) / "recipe.json"
    if not recipe.is_file():
        raise FileNotFoundError(f"{recipe}: the recipe's record is written before its runs start")
    k = max_at_once or at_once(len(runs))
    n = threads or threads_each(k)
    import factrl

    src = str(Path(factrl.__file__).resolve().parents[1])  # the children import this factrl
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n), "PYTHONPATH": path}
    cmd = [sys.executable, "-m", "factrl", "train", "factworld", "--from", str(recipe), "--out", str(out)]
    for s in stages:
        cmd += ["--stage", s]
    if k < len(runs):
        print(f"[factworld] {k} of {len(runs)} runs at once (memory); the others start as one ends",
              file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    waiting, running, codes = list(runs), {}, {}
    while waiting or running:
        while waiting and len(running) < k:
            name = waiting.pop(0)
            running[name] = subprocess.Popen([*cmd, "--run", name], env=env)  # noqa: S603 (our own CLI)
            print(f"[factworld] run {name}: process {running[name].pid}, {n} thread(s)", file=sys.stderr, flush=True)
        for name, p in list(running.items()):
            if p.poll() is not None:
                codes[name] = p.returncode
                del running[name]
        if running:
            time.sleep(0.5)
    failed = [f"{name} (exit {code})" for name, code in codes.items() if code != 0]
    if failed:
        raise RuntimeError(f"side-by-side run(s) failed: {', '.join(failed)}; run the recipe again to resume")
    return {"side-by-side": round(time.perf_counter() - t0, 1)}
