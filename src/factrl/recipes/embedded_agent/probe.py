"""The embedded agent's analysis stages: ``table`` (every source and setting, each tag's
metrics with 95 % Wilson intervals, exact McNemar between the last two tags) and
``probe`` (is there a judgement in a model's label probabilities, hidden by a label
bias?). :func:`label_probe` scores the labels after Veri-R1's ``<answer> Label:``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from factrl.metrics.significance import mcnemar_exact, wilson_interval

__all__ = ["label_probe", "probe", "tables"]


def _correct(run: Path) -> dict[str, tuple[bool, bool, bool]]:
    from factrl.runs.trajectories import read_trajectories
    from factrl.metrics.veri_r1 import score_item

    out = {}
    for t in read_trajectories(run / "trajectories.jsonl"):
        item = score_item(t.claim.label, t.claim.evidence_ids, t.verdict)
        out[t.claim_id] = (t.verdict.label == t.claim.label, bool(item.verified), bool(t.verdict.format_ok))
    return out


def tables(out: Path, tags: list[str]) -> str:
    """Markdown: every source and setting, each tag's metrics with 95 % Wilson intervals,
    per-label recall and the majority class; exact McNemar of the last tag vs the one before."""
    lines = ["| source / setting | model | n | format ok | label acc [95 % CI] | macro-F1 | recall S / R / N "
             "| verification acc [95 % CI] | joint | evidence | majority |",
             "|---|---|---:|---:|---|---:|---|---|---:|---:|---|"]
    tests = []
    runs = sorted({p.parent.name for t in tags for p in (out / "eval" / t).glob("*/metrics.json")})
    for run in runs:
        for tag in tags:
            mf = out / "eval" / tag / run / "metrics.json"
            if not mf.exists():
                continue
            m = json.loads(mf.read_text())
            n = m["n"]
            lo, hi = wilson_interval(round(m["label_acc"] * n), n)
            vlo, vhi = wilson_interval(round(m["verification_acc"] * n), n)
            pl = m.get("per_label") or {}
            rec = " / ".join(f"{pl[k]['label_acc']:.2f}" if k in pl else "–"
                             for k in ("SUPPORT", "REFUTE", "NOT ENOUGH INFO"))
            maj = m.get("majority_baseline") or {}
            lines.append(f"| {run} | {tag} | {n} | {m['format_ok_rate']:.3f} | {m['label_acc']:.3f} [{lo:.2f}, {hi:.2f}] "
                         f"| {m['macro_f1']:.3f} | {rec} | {m['verification_acc']:.3f} [{vlo:.2f}, {vhi:.2f}] "
                         f"| {m['joint_acc']:.3f} | {m['evidence_score']:.3f} | {maj.get('label', '–')} "
                         f"{maj.get('acc', 0):.3f} |")
        if len(tags) >= 2:
            a_dir, b_dir = out / "eval" / tags[-2] / run, out / "eval" / tags[-1] / run
            if (a_dir / "trajectories.jsonl").exists() and (b_dir / "trajectories.jsonl").exists():
                a, b = _correct(a_dir), _correct(b_dir)
                ids = sorted(set(a) & set(b))
                for i, what in ((0, "label accuracy"), (1, "verification accuracy"), (2, "format-ok")):
                    only_b = sum(b[x][i] and not a[x][i] for x in ids)
                    only_a = sum(a[x][i] and not b[x][i] for x in ids)
                    tests.append(f"- {run}, {what}, {tags[-1]} vs {tags[-2]}: {only_b} claims only "
                                 f"{tags[-1]} got right, {only_a} only {tags[-2]}; exact McNemar p = "
                                 f"{mcnemar_exact(only_a, only_b):.3g}")
    return "\n".join(lines + [""] + tests) + "\n"


def label_probe(lm, ctxs: list[list[int]], gold: list) -> dict:
    """The label each context (ending in ``<answer> Label:``) makes most probable (summed
    log-probability of the label's tokens, :mod:`factrl.lm.label_scores`), scored against
    ``gold``: raw, and after contextual calibration (:func:`~factrl.lm.label_scores.label_bias`,
    each label's mean log-probability over these contexts subtracted: label-free, but fitted
    on the same claims). A context where no label has a finite score predicts nothing and
    counts as wrong (``unread``). ``chance`` is the accuracy of the predicted label counts
    drawn independently of the gold labels."""
    from factrl.forced import LABELS
    from factrl.lm.label_scores import label_bias, label_continuations, label_logprobs, pick_labels

    if not ctxs or len(ctxs) != len(gold):
        raise ValueError(f"label_probe needs one gold label per context, got {len(ctxs)} contexts "
                         f"and {len(gold)} labels")
    rows = label_logprobs(lm, ctxs, label_continuations(lm, [lab.value for lab in LABELS]))
    out = {}
    for name, shift in (("raw", None), ("calibrated", label_bias(rows))):
        pred = [None if k is None else LABELS[k] for k in pick_labels(rows, shift)]
        right = sum(p is not None and p == g for p, g in zip(pred, gold))
        counts = {lab: pred.count(lab) for lab in LABELS}
        lo, hi = wilson_interval(right, len(gold))
        out[name] = {"acc": round(right / len(gold), 3), "ci95": [round(lo, 3), round(hi, 3)],
                     "chance": round(sum(counts[lab] * gold.count(lab) for lab in LABELS) / len(gold) ** 2, 3),
                     "recall": {lab.value: round(sum(p == g == lab for p, g in zip(pred, gold))
                                                 / max(1, gold.count(lab)), 3) for lab in LABELS},
                     "predicted": {lab.value: counts[lab] for lab in LABELS},
                     "unread": pred.count(None)}
    return out


def probe(out: Path, model: str, tag: str, source: str = "scifact") -> dict:
    """Is there a judgement in the model's label probabilities, hidden by a label bias?
    On the offline held-out trajectories of ``eval --tag``: :func:`label_probe` with
    ``<answer> Label:`` appended (a) straight after the prompt and (b) after the
    episode's own reasoning (its model text up to ``<answer>``)."""
    from factrl.runs.trajectories import read_trajectories
    from factrl.forced import ANSWER_OPENING
    from factrl.lm.loader import load_lm

    trajs = read_trajectories(out / "eval" / tag / f"{source}-offline" / "trajectories.jsonl")
    lm = load_lm(model)
    gold = [t.claim.label for t in trajs]
    result: dict = {"model": model, "tag": tag, "source": source, "n": len(trajs)}
    for variant in ("direct", "after_reasoning"):
        ctxs = []
        for t in trajs:
            reasoning = "".join(turn.text for turn in t.turns if turn.source == "model").split("<answer>")[0]
            extra = lm.encode(reasoning.rstrip()) if variant == "after_reasoning" else []
            ctxs.append(list(t.prompt_ids) + extra + lm.encode(ANSWER_OPENING))
        t0 = time.perf_counter()
        result[variant] = {**label_probe(lm, ctxs, gold), "seconds": round(time.perf_counter() - t0, 1)}
    dest = out / "eval" / tag / f"probe-{source}.json"
    dest.write_text(json.dumps(result, indent=1) + "\n")
    return result
