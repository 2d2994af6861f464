"""Training metrics as JSONL (resume-safe) and reward/accuracy curves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

__all__ = ["JsonlMetricsCallback", "TimeBudgetCallback", "read_metrics", "plot_curves"]


class JsonlMetricsCallback(TrainerCallback):
    """Append every log event as one JSON line ``{"step": …, ...}``.

    On resume, lines from steps after the checkpoint are dropped first, so a crash
    between a log and the next checkpoint never duplicates steps.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keep = [r for r in read_metrics(self.path) if r.get("step", 0) <= state.global_step]
        with self.path.open("w", encoding="utf-8") as fh:
            for r in keep:
                fh.write(json.dumps(r) + "\n")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if not logs:
            return
        row = {"step": state.global_step, **{k: v for k, v in logs.items() if _jsonable(v)}}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


class TimeBudgetCallback(TrainerCallback):
    """Stop training (and save) once ``minutes`` of wall time have passed since this
    process started training — a budget, e.g. for benchmarks on a fixed machine."""

    def __init__(self, minutes: float) -> None:
        self.seconds = minutes * 60.0
        self.start: float | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import time

        self.start = time.monotonic()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import time

        if self.start is not None and time.monotonic() - self.start >= self.seconds:
            control.should_training_stop = True
            control.should_save = True


def _jsonable(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool)) or v is None


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not Path(path).exists():
        return []
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line from a crash
    return rows


def plot_curves(metrics_path: Path, out_png: Path) -> Path | None:
    """Reward total/components and rollout label accuracy against the step."""
    rows = [r for r in read_metrics(metrics_path) if "reward" in r]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label in [
        ("rewards/reward_total/mean", "total"),
        ("rewards/reward_label/mean", "label × validity"),
        ("rewards/reward_evidence/mean", "evidence IoU"),
        ("rewards/reward_format/mean", "format"),
    ]:
        if any(key in r for r in rows):
            ax1.plot(steps, [r.get(key) for r in rows], label=label)
    ax1.set_xlabel("step")
    ax1.set_ylabel("mean reward")
    ax1.legend()
    ax1.set_title("Rollout rewards")
    key = "rewards/label_correct/mean"
    if any(key in r for r in rows):
        ax2.plot(steps, [r.get(key) for r in rows], color="tab:green")
    ax2.set_xlabel("step")
    ax2.set_ylabel("label accuracy (rollouts)")
    ax2.set_ylim(0, 1)
    ax2.set_title("Rollout label accuracy")
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png
