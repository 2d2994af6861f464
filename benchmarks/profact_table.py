"""ProFact held-out evaluations side by side, with paired tests against a reference run.

Each RUN is an evaluation directory (``metrics.json`` + ``trajectories.jsonl``, as
``factrl eval`` or ``train grpo --eval-held-out`` write them) over the same claims:

    python benchmarks/profact_table.py base=runs/pf/base/eval_before \\
        warm-up=runs/pf/grpo-process/eval_before grpo-process=runs/pf/grpo-process/eval_after \\
        grpo-verdict-only=runs/pf/grpo-label/eval_after --reference warm-up

Prints a Markdown table (n, format-ok, Q-only and Q+A METEOR, label accuracy with a 95 %
Wilson interval, macro-F1, AVeriTeC score, s/claim, the labels predicted) and, for every
run against the reference on the claims both saw: exact McNemar on label correctness and
a two-sided Wilcoxon signed-rank test on the per-claim question and QA METEOR (the
reward's own process terms).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

from factrl.metrics.significance import mcnemar_exact, wilson_interval


def load(run: Path) -> tuple[dict, dict[str, dict]]:
    metrics = json.loads((run / "metrics.json").read_text())
    per_claim: dict[str, dict] = {}
    for line in (run / "trajectories.jsonl").read_text().splitlines():
        t = json.loads(line)
        per_claim.setdefault(t["claim_id"], t)
    return metrics, per_claim


def _f(x: object, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if isinstance(x, (int, float)) else "n/a"


def row(name: str, metrics: dict, trajs: dict[str, dict]) -> str:
    av = metrics.get("averitec") or {}
    n = len(trajs)
    right = sum(t["verdict"]["label"] == t["claim"]["label"] for t in trajs.values())
    lo, hi = wilson_interval(right, n)
    said = Counter((t["verdict"]["label"] or "none") for t in trajs.values())
    said_s = ", ".join(f"{k} {v}" for k, v in said.most_common())
    return (f"| {name} | {n} | {_f(metrics.get('format_ok_rate'))} | {_f(av.get('q_only_meteor'))} | "
            f"{_f(av.get('qa_meteor'))} | {right / n:.3f} [{lo:.2f}, {hi:.2f}] | {_f(av.get('label_macro_f1'))} | "
            f"{_f(av.get('averitec_score'))} | {_f(metrics.get('seconds_per_claim'), 1)} | {said_s} |")


def compare(name: str, trajs: dict[str, dict], ref_name: str, ref: dict[str, dict]) -> list[str]:
    from scipy.stats import wilcoxon

    common = sorted(set(trajs) & set(ref))
    if not common:
        return [f"- {name} vs {ref_name}: no claim in common"]
    ok = lambda t: t["verdict"]["label"] == t["claim"]["label"]  # noqa: E731
    b = sum(ok(trajs[c]) and not ok(ref[c]) for c in common)
    c_ = sum(ok(ref[c]) and not ok(trajs[c]) for c in common)
    out = [f"- {name} vs {ref_name} ({len(common)} claims): label right only in {name} {b}, only in {ref_name} "
           f"{c_}; exact McNemar p = {mcnemar_exact(b, c_):.3g}"]
    for part in ("question", "qa"):
        x = [trajs[c]["reward"]["components"].get(part, 0.0) for c in common]
        y = [ref[c]["reward"]["components"].get(part, 0.0) for c in common]
        diffs = [a - b for a, b in zip(x, y)]
        mean = sum(diffs) / len(diffs) if diffs else math.nan
        p = wilcoxon(x, y).pvalue if any(diffs) else 1.0
        out.append(f"  - per-claim {part} METEOR: mean {sum(x) / len(x):.3f} vs {sum(y) / len(y):.3f} "
                   f"(mean difference {mean:+.3f}; Wilcoxon signed-rank p = {p:.3g})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", metavar="NAME=DIR")
    ap.add_argument("--reference", help="the NAME the others are tested against")
    args = ap.parse_args()
    runs = {}
    for spec in args.runs:
        name, _, path = spec.partition("=")
        runs[name] = load(Path(path))
    print("| run | n | format ok | Q-only METEOR | Q+A METEOR | label acc [95 % CI] | macro-F1 | AVeriTeC score | s/claim | labels said |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
    for name, (metrics, trajs) in runs.items():
        print(row(name, metrics, trajs))
    if args.reference:
        print()
        ref = runs[args.reference][1]
        for name, (_, trajs) in runs.items():
            if name != args.reference:
                print("\n".join(compare(name, trajs, args.reference, ref)))


if __name__ == "__main__":
    main()
