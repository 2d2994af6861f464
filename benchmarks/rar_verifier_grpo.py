"""Binary RAR before/after GRPO with the trained verifier: paired tests on held-out prompts.

Reads two ``factrl eval --agent rar`` run folders per prompt set (before = the untrained
policy, after = the GRPO checkpoint), evaluated with ``--verifier factrl-verifier`` and
matched by prompt id, and reports:

- contradiction rate: responses the verifier finds contradicting their evidence
  (reward ``no_contradiction`` = 0), with Wilson 95 % intervals, and the exact McNemar
  p of the change (one-sided p for "lower after" beside the two-sided one);
- the long-form contradiction rate of ``hallucination.json`` (sentences as claims, each
  judged against the top 10 chunks of 100 words);
- short-form answer accuracy (correct among all questions; abstentions count as not
  correct), with McNemar on correctness;
- mean response length in words.

    python benchmarks/rar_verifier_grpo.py --before runs/rarv/before-test --after runs/rarv/after-test \\
        [--before runs/rarv/before-utility --after runs/rarv/after-utility] --json runs/rarv/compare.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any


def _rows(run: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (run / "trajectories.jsonl").read_text().splitlines():
        t = json.loads(line)
        if t["claim_id"] in out:
            continue
        comps = (t.get("reward") or {}).get("components") or {}
        response = str(t.get("meta", {}).get("response", ""))
        out[t["claim_id"]] = {
            "kind": t["claim"].get("meta", {}).get("kind", "long"),
            "contradicts": comps.get("no_contradiction") == 0.0 and not comps.get("episode_error")
            and not comps.get("empty_response"),
            "scored": "no_contradiction" in comps,
            "correct": bool(t.get("meta", {}).get("correct")) and not t.get("meta", {}).get("abstained"),
            "words": len(response.split()),
        }
    return out


def _one_sided(b: int, c: int) -> float:
    """P(X <= c) for X ~ Bin(b + c, 1/2): the chance of c or fewer "worse after" flips."""
    n = b + c
    return sum(math.comb(n, i) for i in range(c + 1)) / 2**n if n else 1.0


def compare(before: Path, after: Path) -> dict[str, Any]:
    from factrl.metrics.significance import mcnemar_exact, wilson_interval

    a, b = _rows(before), _rows(after)
    ids = sorted(set(a) & set(b))
    n = len(ids)
    con_a = sum(a[i]["contradicts"] for i in ids)
    con_b = sum(b[i]["contradicts"] for i in ids)
    fixed = sum(a[i]["contradicts"] and not b[i]["contradicts"] for i in ids)  # contradiction gone
    broke = sum(not a[i]["contradicts"] and b[i]["contradicts"] for i in ids)
    short = [i for i in ids if a[i]["kind"] == "short"]
    right_a = sum(a[i]["correct"] for i in short)
    right_b = sum(b[i]["correct"] for i in short)
    lost = sum(a[i]["correct"] and not b[i]["correct"] for i in short)
    won = sum(not a[i]["correct"] and b[i]["correct"] for i in short)
    out: dict[str, Any] = {
        "prompts": n,
        "contradiction_rate": {"before": con_a / n, "after": con_b / n,
                               "before_ci95": list(wilson_interval(con_a, n)),
                               "after_ci95": list(wilson_interval(con_b, n)),
                               "removed": fixed, "introduced": broke,
                               "mcnemar_p_two_sided": mcnemar_exact(fixed, broke),
                               "p_one_sided_lower_after": _one_sided(fixed, broke)},
        "short_form": {"n": len(short), "accuracy_before": right_a / len(short) if short else None,
                       "accuracy_after": right_b / len(short) if short else None, "right_to_wrong": lost,
                       "wrong_to_right": won, "mcnemar_p_two_sided": mcnemar_exact(won, lost)},
        "mean_words": {"before": sum(a[i]["words"] for i in ids) / n, "after": sum(b[i]["words"] for i in ids) / n},
    }
    for tag, run in (("before", before), ("after", after)):
        h = run / "hallucination.json"
        if h.is_file():
            lf = json.loads(h.read_text())["long_form"]
            out.setdefault("long_form", {})[tag] = {k: lf.get(k) for k in (
                "contradiction_rate", "hallucination_rate", "mean_claims", "scored_responses")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, action="append", required=True)
    ap.add_argument("--after", type=Path, action="append", required=True)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if len(args.before) != len(args.after):
        ap.error("give one --after per --before")
    report = {str(a): compare(a, b) for a, b in zip(args.before, args.after)}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
