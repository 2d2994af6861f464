"""The choice-mode verifier's margins on the policy's own responses, to set the ``rar``
reward's ``margin`` for a GRPO run.

The embedded verifier (SmolLM2-135M) prefers "no contradiction" on every labelled pair
(``rar_verifier_agreement.py --choice``), so at margin 0 every reward is 1 and GRPO has
no advantage to follow. This samples ``--rollouts`` responses per prompt from the policy
on the first ``--n`` training prompts (as GRPO would, at the preset's temperature),
verifies them with the reward's evidence settings and prints the margins' quantiles: a
margin at the median gives the reward its largest variance. It says nothing about whether
the verifier is right (that is what the agreement benchmark measures).

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/rar_policy_margins.py \\
        --prompts runs/rar_prompts/train.jsonl --n 12 --rollouts 2 --k 3 --chunk-tokens 128
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from factrl.components import RunSpec, build_components
from factrl.datasets import load_dataset
from factrl.envs import POLICY, EnvSpec
from factrl.rewards.rar_verifier import strip_think, verify_by_choice
from factrl.rollout import RolloutConfig, run_episodes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--prompts", type=Path, default=Path("runs/rar_prompts/train.jsonl"))
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--rollouts", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--chunk-tokens", type=int, default=128)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    claims = load_dataset("rar_prompts", args.prompts, "train").claims[: args.n]
    # the policy also verifies: one model for both roles
    run = build_components(RunSpec(agent=EnvSpec(name="rar"), reward="rar",
                                   reward_params={"mode": "choice", "k": args.k, "chunk_tokens": args.chunk_tokens},
                                   models={POLICY: args.model}))
    lm, make_env, reward = run.policy, run.make_env, run.reward
    t0 = time.perf_counter()
    trajs = run_episodes(make_env, [c for c in claims for _ in range(args.rollouts)], lm,
                         RolloutConfig(temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                                       batch_size=len(claims) * args.rollouts, seed=0), score=False)
    rows = [(t, strip_think(t.model_text)) for t in trajs if t.error is None and strip_think(t.model_text)]
    outs = verify_by_choice(lm, [t.claim.text for t, _ in rows], [r for _, r in rows],
                            [reward.evidence(t, f"{t.claim.text}\n{r}") for t, r in rows])
    margins = sorted(o.margin for o in outs if o.margin is not None)
    q = statistics.quantiles(margins, n=4) if len(margins) > 1 else margins * 3
    result = {"model": args.model, "prompts": str(args.prompts), "n_prompts": len(claims), "rollouts": args.rollouts,
              "responses": len(rows), "k": args.k, "chunk_tokens": args.chunk_tokens,
              "margin_min": margins[0], "margin_q1": q[0], "margin_median": q[1], "margin_q3": q[2],
              "margin_max": margins[-1], "seconds": time.perf_counter() - t0, "margins": margins}
    print(json.dumps({k: v for k, v in result.items() if k != "margins"}), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
