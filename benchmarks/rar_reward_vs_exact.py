"""Binary RAR's cross-encoder reward against the exact world verifier, on the responses
a factworld recipe run already evaluated.

Every held-out (and validation) response of a ``factrl train factworld`` Binary RAR run
was judged by the exact verifier (``rar_factworld``: every sentence against the world's
fact table; stored as the trajectory's ``no_contradiction``). This scores the same
responses with the ``rar`` reward and a cross-encoder verifier (default
``factrl-verifier``: each response sentence against the top ``k`` chunks of the prompt's
notes, contradicted when any calibrated P(REFUTE) passes the verifier's threshold) and
reports, per evaluated stage: how often the two agree, the share of the exact verifier's
contradictions the cross-encoder catches (recall, Wilson 95 %), and the share of clean
responses it calls contradicted (false alarms) — how good a reward the cross-encoder is
on that world before GRPO trains on it.

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/rar_reward_vs_exact.py RUN \\
        [--stage warmup --stage grpo-100pct] [--verifier factrl-verifier] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any


def compare(run: Path, stage: str, reward: Any) -> dict[str, Any]:
    from factrl.metrics.significance import wilson_interval
    from factrl.runs.trajectories import read_trajectories

    trajs = [t for t in read_trajectories(run / "eval" / stage / "trajectories.jsonl")
             if t.error is None and t.reward is not None]
    exact = [t.reward.components.get("no_contradiction", t.reward.total) == 0.0 for t in trajs]
    scored = reward.score([copy.deepcopy(t) for t in trajs])
    said = [b.components.get("no_contradiction", b.total) == 0.0 for b in scored]
    both = sum(e and s for e, s in zip(exact, said))
    alarms = sum(s and not e for e, s in zip(exact, said))
    n, bad = len(trajs), sum(exact)
    return {"stage": stage, "responses": n, "exact_contradicted": bad, "verifier_contradicted": sum(said),
            "agreement": (n - sum(e != s for e, s in zip(exact, said))) / n if n else None,
            "recall": both / bad if bad else None, "recall_ci": wilson_interval(both, bad) if bad else None,
            "false_alarm": alarms / (n - bad) if n > bad else None,
            "false_alarm_ci": wilson_interval(alarms, n - bad) if n > bad else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a factworld Binary RAR recipe run directory")
    ap.add_argument("--stage", action="append", help="evaluated stages (eval/<stage>); default: all")
    ap.add_argument("--verifier", default="factrl-verifier")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--chunk-tokens", type=int, default=128)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from factrl.rewards.base import RewardDeps, RewardSpec, build_reward
    from factrl.verifier.asset import load_verifier

    stages = args.stage or sorted(p.name for p in (args.run / "eval").iterdir()
                                  if (p / "trajectories.jsonl").is_file())
    reward = build_reward(RewardSpec(name="rar", params={"k": args.k, "chunk_tokens": args.chunk_tokens,
                                                         "min_documents": 1, "nonstop_penalty": False}),
                          RewardDeps(lms={"verifier": load_verifier(args.verifier)}))
    rows = [compare(args.run, s, reward) for s in stages]
    print("| stage | responses | exact: contradicted | cross-encoder: contradicted | agreement | "
          "recall of exact contradictions [95 %] | false alarms on clean responses [95 %] |")
    print("|---|---:|---:|---:|---:|---|---|")
    for r in rows:
        rec = f"{r['recall']:.3f} [{r['recall_ci'][0]:.2f}, {r['recall_ci'][1]:.2f}]" if r["recall"] is not None else "—"
        fa = (f"{r['false_alarm']:.3f} [{r['false_alarm_ci'][0]:.2f}, {r['false_alarm_ci'][1]:.2f}]"
              if r["false_alarm"] is not None else "—")
        print(f"| {r['stage']} | {r['responses']} | {r['exact_contradicted']} | {r['verifier_contradicted']} | "
              f"{r['agreement']:.3f} | {rec} | {fa} |")
    if args.json:
        args.json.write_text(json.dumps({"run": str(args.run), "verifier": args.verifier, "k": args.k,
                                         "chunk_tokens": args.chunk_tokens, "stages": rows}, indent=2))


if __name__ == "__main__":
    main()
