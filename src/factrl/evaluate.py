"""Evaluation runs that stream results to disk and resume after a crash.

A run directory holds ``run.json`` (what was run), ``trajectories.jsonl`` (one line per
finished claim, appended and flushed as batches finish), ``metrics.json``, ``report.md``,
``report.html`` (:mod:`factrl.report.html`) and ``run.lock``. Re-running the same command
skips the claims already in ``trajectories.jsonl``; a line cut short by a crash is
discarded and redone. Episodes that ended in an LM error (``generate failed: ...``: a
server down after its retries) are run again on resumption — with ``retry_errors``,
every episode that ended in an error — their records taken out of the file first, so it
keeps one record per claim; ``errors_retried_this_run`` counts them.

The directory's format, lock, settings and trajectory I/O are :mod:`factrl.runs`'s;
this module runs the episodes and scores them. Only one run writes to a directory at a
time (:mod:`factrl.runs.lock`): a second run on the
same directory fails at once. Should a file still hold two records of one claim (e.g.
written before the lock existed), metrics count the first and report how many were
ignored (``duplicates_ignored``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from factrl.envs.base import Env
from factrl.lm.base import LM
from factrl.rewards.base import Reward
from factrl.rollout import RolloutConfig, run_episodes
from factrl.runs.info import RUN_INFO_FILE, RunMismatchError, check_run_info
from factrl.runs.lock import locks_run_dir
from factrl.runs.trajectories import (TRAJ_FILE, TrajectoryFileError, append_trajectory, drop_records,
                                      first_per_claim, read_trajectories)
from factrl.types import Claim, Trajectory

__all__ = [
    "evaluate",
    "read_trajectories",
    "first_per_claim",
    "RunMismatchError",
    "TrajectoryFileError",
    "EmptyRunError",
    "AgentMetricsError",
    "agent_metrics",
    "TRAJ_FILE",
]


class EmptyRunError(ValueError):
    """There are no claims to evaluate."""


class AgentMetricsError(ValueError):
    """An agent's own run metrics refused the run (the message says why, in one line)."""


def _lm_error(error: str | None) -> bool:
    """Whether an episode's error is its LM's (a failed generate call: a server down or
    refusing after its retries), which running the episode again may not repeat."""
    return error is not None and error.startswith("generate failed:")


def _errored(records: Sequence[Trajectory], wanted: set[str], *, every: bool) -> set[str]:
    """Claims whose counted record (the first) ended in an LM error (``every``: in any error)."""
    firsts, _ = first_per_claim(records, wanted)
    return {t.claim_id for t in firsts if t.error is not None and (every or _lm_error(t.error))}


def _require_claims(claims: Sequence[Claim]) -> None:
    if not claims:
        raise EmptyRunError("no claims to evaluate (the dataset, after filters and --limit, is empty)")


def _run_counts(duplicates: int, run_info: dict[str, Any] | None) -> dict[str, int]:
    """Counts about the run's input that metrics.json reports beside the scores."""
    return {
        "duplicates_ignored": duplicates,
        "skipped_rows": int((run_info or {}).get("skipped_rows") or 0),
    }


@locks_run_dir("out_dir")
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
    lms: Any = None,
    retry_errors: bool = False,
    agent: str | None = None,
    metric_lms: Mapping[str, LM] | None = None,
    metric_params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Verify every claim once, streaming trajectories scored by ``reward`` (default: the
    environment's own); returns the metrics dict that is also written to ``metrics.json``.
    ``lms`` maps other roles (e.g. HARIS's ``"searcher"``) to their LMs. Claims whose
    episode ended in an LM error are run again (``retry_errors``: in any error).

    ``agent`` names the agent whose own run metrics (:data:`~factrl.metrics.run_metrics.RUN_METRICS`,
    e.g. Binary RAR's hallucination rates) then score the run, with ``metric_params``;
    they write their own files and are returned under ``"agent_metrics"``. Their
    ``"judge"`` is ``metric_lms["judge"]``, else the reward's verifier, else ``lm``. An
    agent metric that refuses its input raises :class:`AgentMetricsError`."""
    from factrl.metrics.veri_r1 import compute_metrics
    from factrl.report.html import html_report
    from factrl.report.markdown import format_failure_lines, format_summary_line, metrics_markdown
    from factrl.runs.rundir import RunData

    rollout = rollout or RolloutConfig()
    _require_claims(claims)
    if rollout.group != 1:
        raise ValueError("evaluation runs one episode per claim (group=1)")
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"claim ids must be unique; {dup!r} appears more than once")
    out_dir.mkdir(parents=True, exist_ok=True)
    check_run_info(out_dir / RUN_INFO_FILE, run_info or {}, force=force)

    path = out_dir / TRAJ_FILE
    wanted = set(ids)
    records = read_trajectories(path, repair=True)
    retried = _errored(records, wanted, every=retry_errors)
    if retried:
        drop_records(path, retried)
    done = {t.claim_id for t in records if t.claim_id not in retried}
    todo = [c for c in claims if c.id not in done]
    total, t_start = len(claims), time.perf_counter()
    if progress and (done or retried):
        again = f"; running again {len(retried)} that ended in {'an error' if retry_errors else 'an LM error'}"
        _say(f"resuming: {len(done & wanted)} of {total} claims already done{again if retried else ''}")

    finished = len(done)
    with path.open("a", encoding="utf-8") as fh:

        def write(traj: Trajectory) -> None:
            nonlocal finished
            _record_label_confidence(traj, lm)
            append_trajectory(fh, traj)
            finished += 1

        for start in range(0, len(todo), rollout.batch_size):
            batch = todo[start : start + rollout.batch_size]
            run_episodes(make_env, batch, lm, rollout, on_trajectory=write, reward=reward, lms=lms)
            os.fsync(fh.fileno())
            if progress:
                rate = (time.perf_counter() - t_start) / max(1, finished - len(done))
                _say(f"[{finished}/{total}] {rate:.1f} s/claim")

    trajs, duplicates = first_per_claim(read_trajectories(path), wanted)
    # Prompts without gold labels (Binary RAR's prompt sets) have no label metrics; the
    # agent's own run metrics (factrl.metrics.run_metrics) score them.
    # The label metrics judge episodes under the reward's convention (Veri-R1's "paper" or
    # "authors_code"; rewards without one are judged as the paper reads them).
    convention = getattr(reward, "convention", "paper")
    labelled = all(t.claim.label is not None for t in trajs)
    metrics = compute_metrics(trajs, convention=convention) if labelled else unlabelled_metrics(trajs)
    metrics.update(_run_counts(duplicates, run_info))
    wall = time.perf_counter() - t_start
    n_new = finished - len(done)
    # Throughput (episodes run in parallel batches) and per-episode latency differ.
    metrics["seconds_per_claim"] = wall / n_new if n_new else None
    lat = [t.timings.get("total_s", 0.0) for t in trajs]
    metrics["episode_latency_s"] = sum(lat) / len(lat) if lat else None
    metrics["wall_seconds_this_run"] = wall
    metrics["claims_this_run"] = n_new
    metrics["errors_retried_this_run"] = len(retried)
    # AVeriTeC claims (after the timing, which scoring must not count): the shared task's
    # submission file beside the trajectories and its scores; per-stage failure counts.
    from factrl.metrics.averitec_submission import averitec_run_metrics

    metrics.update(averitec_run_metrics(out_dir, trajs))
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    title = f"Evaluation: {run_info.get('dataset', 'claims') if run_info else 'claims'}"
    (out_dir / "report.md").write_text(metrics_markdown(metrics, title=title))
    # The page shows exactly what the metrics counted (not other claims the file may hold).
    run = RunData(name=out_dir.resolve().name, path=out_dir, info=dict(run_info or {}), metrics=metrics,
                  trajectories=trajs)
    (out_dir / "report.html").write_text(html_report([run], title=title), encoding="utf-8")
    if progress:
        _say(format_summary_line(metrics))
        for line in format_failure_lines(metrics):
            _say(line)
    if agent is not None and not (metrics["n"] and metrics["errors"] == metrics["n"]):
        found = agent_metrics(out_dir, agent, trajs, lm, reward=reward, metric_lms=metric_lms, params=metric_params)
        if found is not None:
            metrics["agent_metrics"] = found
    return metrics


def agent_metrics(out_dir: Path, agent: str, trajs: Sequence[Trajectory], lm: LM, *, reward: Reward | None,
                  metric_lms: Mapping[str, LM] | None = None,
                  params: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The agent's own run metrics on ``trajs`` (None for an agent without any)."""
    from factrl.metrics.run_metrics import RUN_METRICS

    if agent not in RUN_METRICS:
        return None
    judge = (metric_lms or {}).get("judge") or getattr(reward, "verifier", None) or lm
    try:
        return RUN_METRICS.get(agent)(out_dir, trajs, lms={**(metric_lms or {}), "policy": lm, "judge": judge},
                                      reward=reward, **({"params": dict(params)} if params else {}))
    except ValueError as exc:  # e.g. a reward with no evidence source for the judge
        raise AgentMetricsError(str(exc)) from exc


def unlabelled_metrics(trajs: Sequence[Trajectory]) -> dict[str, Any]:
    """What can be said of episodes on unlabelled prompts: counts, the share of answered
    episodes, the mean reward; label metrics are None (there is no gold to compare)."""
    from collections import Counter

    from factrl.metrics.failures import episode_error_type

    n = len(trajs)
    scored = [t.reward.total for t in trajs if t.reward.components or t.reward.total]
    return {
        "n": n,
        "labelled": False,
        "label_acc": None,
        "verification_acc": None,
        "joint_acc": None,
        "evidence_score": None,
        "format_ok_rate": sum(t.verdict.format_ok for t in trajs) / n if n else None,
        "answered_rate": sum(t.verdict.answered for t in trajs) / n if n else None,
        "mean_reward": sum(scored) / len(scored) if scored else None,
        "errors": sum(t.error is not None for t in trajs),
        "episode_errors": dict(Counter(episode_error_type(t.error) for t in trajs if t.error is not None)),
    }


def _record_label_confidence(traj: Trajectory, lm: LM) -> None:
    """Veri-R1 §4.3's confidence (probability of the label's first token, read from the
    recorded logprobs) into ``traj.meta["confidence"]``, where it can be read exactly;
    not for backends whose ids carry no logprob of their own (``logprobs_per_id``)."""
    from factrl.metrics.label_confidence import label_confidence

    if getattr(lm, "logprobs_per_id", True):
        conf = label_confidence(traj, lm.decode)
        if conf is not None:
            traj.meta["confidence"] = conf


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
