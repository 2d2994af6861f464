"""Learning benchmark: does GRPO teach the embedded SmolLM2-135M-Instruct on CPU?

Offline Veri-R1 setting on SciFact train claims (gold evidence + context in the prompt),
split into a training part and a held-out part (stratified, seeded). Steps:

1. evaluate the base model on the held-out part (greedy);
2. format warm-up: SFT on protocol-perfect trajectories of the rule-based template
   teacher over a subset of the training part (the base model never emits the tag
   protocol, so the paper's reward is 0 for every rollout and GRPO has no signal);
3. evaluate the warm-started model;
4. GRPO (preset ``veri_r1_offline_cpu``: the paper's reward without the validity weight) from it
   within a time budget;
5. evaluate the GRPO model; print and write ``learning.md``.

    python benchmarks/learning_scifact.py --out runs/learning-offline --grpo-minutes 45

Every stage resumes: rerun the same command after an interruption.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def _eval(cfg, model: str, out: Path, held_out, max_new_tokens: int) -> dict:
    from factrl.rollout import RolloutConfig
    from factrl.train.learning import evaluate_held_out

    if (out / "metrics.json").exists():
        return json.loads((out / "metrics.json").read_text())
    return evaluate_held_out(cfg, model, out, claims=held_out, batch_size=32, rollout=RolloutConfig(
        temperature=0.0, max_new_tokens=max_new_tokens,
        max_total_tokens=max(max_new_tokens, cfg.rollout.max_total_tokens), batch_size=32))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("runs/learning-offline"))
    ap.add_argument("--preset", default="veri_r1_offline_cpu")
    ap.add_argument("--held-out-fraction", type=float, default=0.12)
    ap.add_argument("--sft-claims", type=int, default=160)
    ap.add_argument("--sft-lr", type=float, default=5e-5)
    ap.add_argument("--sft-epochs", type=float, default=1.0)
    ap.add_argument("--sft-max-length", type=int, default=1024,
                    help="longer teacher trajectories are skipped (online ones need ~1,100-1,500 tokens)")
    ap.add_argument("--init-model", default="smollm2",
                    help="model the format warm-up starts from (default: the embedded SmolLM2)")
    ap.add_argument("--grpo-minutes", type=float, default=45.0)
    ap.add_argument("--eval-tokens", type=int, default=160)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a preset value (repeatable), as in `factrl train grpo --set`")
    args = ap.parse_args()

    from factrl.datasets.sampling import interleave_labels
    from factrl.evaluate import evaluate
    from factrl.rollout import RolloutConfig
    from factrl.train.config import load_run_config, parse_overrides
    from factrl.datasets.prepare import prepare_splits
    from factrl.train.grpo import train_grpo
    from factrl.train.setup import run_env_factory
    from factrl.train.learning import _f
    from factrl.train.sft import SFTSettings, train_sft
    from factrl.train.teacher import TemplateTeacher

    out = args.out
    overrides = parse_overrides(args.set)
    cfg = load_run_config(args.preset, {
        **overrides, "output_dir": str(out / "grpo"), "data.held_out_fraction": args.held_out_fraction,
        "grpo.max_minutes": args.grpo_minutes,
    })
    train, held_out = prepare_splits(cfg.data, out)
    times: dict[str, float] = {}
    print(f"train {len(train)} claims, held-out {len(held_out)}", file=sys.stderr)

    t0 = time.perf_counter()
    base = _eval(cfg, "smollm2", out / "eval_base", held_out, args.eval_tokens)
    times["eval_base_s"] = time.perf_counter() - t0

    sft_final = out / "sft" / "final"
    if not (sft_final / "config.json").exists():
        t0 = time.perf_counter()
        teach = interleave_labels(train)[: args.sft_claims]
        make_env = run_env_factory(cfg)
        online = cfg.env.params.get("mode", "offline" if cfg.env.name == "veri_r1_offline" else "online") == "online"
        evaluate(teach, make_env, TemplateTeacher(teach, online=online), out / "teacher",
                 rollout=RolloutConfig(temperature=0.0, batch_size=64, max_new_tokens=4096, max_total_tokens=1_000_000),
                 run_info={"model": "template-teacher", "agent": {"name": cfg.env.name, "params": cfg.env.params}}, progress=False)
        train_sft(out / "teacher" / "trajectories.jsonl", args.init_model, out / "sft",
                  SFTSettings(learning_rate=args.sft_lr, epochs=args.sft_epochs, batch_size=4,
                              max_length=args.sft_max_length, save_steps=10_000,
                              gradient_checkpointing=False))
        times["sft_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sft = _eval(cfg, str(sft_final), out / "eval_sft", held_out, args.eval_tokens)
    times["eval_sft_s"] = time.perf_counter() - t0

    cfg.model.id = str(sft_final)
    grpo_final = Path(cfg.output_dir) / "final"
    if not (grpo_final / "config.json").exists():
        t0 = time.perf_counter()
        train_grpo(cfg, resume=any(Path(cfg.output_dir).glob("checkpoint-*")))
        times["grpo_s"] = time.perf_counter() - t0
    grpo = _eval(cfg, str(grpo_final), out / "eval_grpo", held_out, args.eval_tokens)

    maj = base.get("majority_baseline") or {}
    keys = ["format_ok_rate", "label_acc", "macro_f1", "verification_acc", "joint_acc", "evidence_score"]
    lines = [
        f"Held-out SciFact train claims: {base['n']} ({cfg.env.params.get('mode', cfg.env.name)} setting); majority class "
        f"{maj.get('label')}: label_acc {_f(maj.get('acc'))}",
        "",
        "| metric | base SmolLM2 | after format SFT | after GRPO |",
        "|---|---|---|---|",
    ]
    lines += [f"| {k} | {_f(base.get(k))} | {_f(sft.get(k))} | {_f(grpo.get(k))} |" for k in keys]
    table = "\n".join(lines) + "\n"
    (out / "learning.md").write_text(table + "\n" + json.dumps(times, indent=1) + "\n")
    print(table)
    print(json.dumps(times, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
