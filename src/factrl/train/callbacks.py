"""Training metrics as JSONL (resume-safe) and reward/accuracy curves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

__all__ = ["JsonlMetricsCallback", "TimeBudgetCallback", "FrozenWeightCasts", "read_metrics", "curve_series",
           "plot_curves"]


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
        import time

        # wall-clock time of the log, so update times can be read off consecutive steps
        row = {"step": state.global_step, **{k: v for k, v in logs.items() if _jsonable(v)},
               "wall_time": round(time.time(), 3)}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


class FrozenWeightCasts(TrainerCallback):
    """A CPU mixed-precision trainer's frozen float32 weights cast once a run, not at
    every call: from each step's beginning to its end (the rollouts, the loss's forwards
    and the backward, all under ``dtype`` autocast) they hold their ``dtype`` casts,
    kept across steps (frozen weights do not change;
    :func:`factrl.lm.autocast_weights.cast_frozen_weights` casts one again if it does).
    Every product is the one autocast computed (bit for bit); between steps (logging,
    checkpoints) and after training the float32 weights are back. :meth:`release` puts
    them back if training stops inside a step."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype
        self.casts: dict = {}
        self._held: Any = None

    def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        import torch

        from factrl.lm.autocast_weights import cast_frozen_weights

        self.release()
        if model is not None:
            self._held = cast_frozen_weights(model, torch.device("cpu"), self.casts, dtype=self.dtype)
            self._held.__enter__()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.release()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.release()

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.__exit__(None, None, None)


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


#: What ``plot_curves`` draws: per panel a title, a y-axis label, y limits (None: automatic)
#: and the (metrics key, legend label) of each line. TRL logs each reward column's
#: per-update mean as ``rewards/<column>/mean``.
CURVE_PANELS: list[tuple[str, str, tuple[float, float] | None, list[tuple[str, str]]]] = [
    ("Rollout rewards", "mean reward", None, [
        ("rewards/reward_total/mean", "total"),
        ("rewards/reward_label/mean", "label"),
        ("rewards/reward_question/mean", "question METEOR"),  # ProFact's process rewards
        ("rewards/reward_qa/mean", "question-answer METEOR"),
        ("rewards/reward_evidence/mean", "evidence IoU"),
        ("rewards/reward_format/mean", "format"),
        ("rewards/reward_unaltered/mean", "total before a control (factrl.train.controls)"),
    ]),
    ("Rollout label accuracy", "label accuracy (rollouts)", (0.0, 1.0), [
        ("rewards/label_correct/mean", "label accuracy"),
    ]),
    # Veri-R1 §4.2 / Figure 4: evidence cover rate (share of responses whose evidence
    # includes all gold evidence) and verification accuracy (correct label and all gold
    # evidence; NEI needs none), per update
    ("Verification (rollouts)", "share of rollouts", (0.0, 1.0), [
        ("rewards/evidence_cover/mean", "evidence cover rate"),
        ("rewards/verified/mean", "verification accuracy"),
    ]),
]
_ALWAYS_DRAWN = 1  # the reward panel appears even when empty; the others only with data (no label
# accuracy for prompts without labels, e.g. Binary RAR)


def curve_series(rows: list[dict[str, Any]]) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """The lines ``plot_curves`` draws, by panel title: ``{label: (steps, values)}``.

    Only step logs count (rows with ``reward``); a key no row has gives no line, so older
    metrics files simply lack the newer lines, and a panel without lines is left out.
    """
    rows = [r for r in rows if "reward" in r]
    out: dict[str, dict[str, tuple[list[int], list[float]]]] = {}
    for title, _, _, lines in CURVE_PANELS:
        series = {}
        for key, label in lines:
            points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
            if points:
                series[label] = ([s for s, _ in points], [v for _, v in points])
        if series:
            out[title] = series
    return out


def plot_curves(metrics_path: Path, out_png: Path) -> Path | None:
    """Reward total/components, rollout label accuracy and, when logged, the rollouts'
    evidence cover rate and verification accuracy (Veri-R1 Figure 4) against the step."""
    rows = [r for r in read_metrics(metrics_path) if "reward" in r]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = curve_series(rows)
    panels = [p for i, p in enumerate(CURVE_PANELS) if i < _ALWAYS_DRAWN or p[0] in series]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    marker = "o" if len(rows) <= 30 else None  # short runs: show the individual updates
    for ax, (title, ylabel, ylim, keys) in zip(axes[0], panels):
        lines = series.get(title, {})
        for label, (steps, values) in lines.items():
            ax.plot(steps, values, label=label, marker=marker, markersize=3)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if ylim is not None:
            pad = 0.02 * (ylim[1] - ylim[0])  # keep lines at 0 or 1 off the frame
            ax.set_ylim(ylim[0] - pad, ylim[1] + pad)
        if lines and len(keys) > 1:
            ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


class NonFiniteGradGuard(TrainerCallback):
    """Skip an optimiser step whose gradients are not finite, and stop after ``patience``
    such steps in a row.

    One NaN gradient applied by the optimiser makes every weight NaN, and every later
    rollout is garbage (seen on a bf16 GPU run: 37 good GRPO updates, then NaN). Before
    each step the trainable gradients are checked; non-finite ones are dropped (``grad =
    None``, so torch's optimisers leave those parameters and their moments as they were).
    Skipped steps are counted in ``skipped_nonfinite_steps`` (logged with the metrics).
    """

    def __init__(self, patience: int = 3) -> None:
        self.patience = patience
        self.skipped = 0
        self.in_a_row = 0

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        import torch

        if model is None:
            return
        grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
        if not grads or all(bool(torch.isfinite(g).all()) for g in grads):
            self.in_a_row = 0
            return
        for p in model.parameters():
            p.grad = None
        self.skipped += 1
        self.in_a_row += 1
        import sys

        print(f"step {state.global_step + 1}: non-finite gradients, optimiser step skipped "
              f"({self.skipped} skipped so far)", file=sys.stderr, flush=True)
        if self.in_a_row >= self.patience:
            print(f"stopping: {self.in_a_row} steps in a row had non-finite gradients", file=sys.stderr, flush=True)
            control.should_training_stop = True

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if logs is not None and "loss" in logs:
            logs["skipped_nonfinite_steps"] = self.skipped


class ExtraLogs(TrainerCallback):
    """Adds ``figures()`` (e.g. dynamic sampling's counts since the last log) to each log
    of a training step, before the metrics file writes it."""

    def __init__(self, figures: Any) -> None:
        self.figures = figures

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if logs is not None and "loss" in logs:
            logs.update(self.figures())
