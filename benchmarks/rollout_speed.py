"""Time GRPO-style rollouts: offline Veri-R1 prompts of the ``veri_r1_offline_cpu`` preset,
8 SciFact claims x 4 samples, 128 tokens, temperature 1, one batch of 32, seeded; the
embedded SmolLM2. Prints seconds and sampled tokens of two timed repeats (after a
warm-up) as JSON. Works with the code before the seams refactor too (put its ``src`` on
PYTHONPATH), so the two can be compared back to back:

    OMP_NUM_THREADS=1 python benchmarks/rollout_speed.py after --index runs/scifact-index
"""
import argparse
import json
import time
from pathlib import Path
import torch
torch.manual_seed(0)
from factrl.train.config import load_run_config
from factrl.lm.loader import load_lm
from factrl.rollout import RolloutConfig, run_episodes
ap = argparse.ArgumentParser()
ap.add_argument("label", help="a name for this run in the output")
ap.add_argument("--index", default="runs/scifact-index")
ap.add_argument("--data-dir", default="../shared/data/scifact")
args = ap.parse_args()
cfg = load_run_config("veri_r1_offline_cpu", {"env.index": args.index, "data.data_dir": args.data_dir})
try:
    from factrl.train.setup import run_env_factory as factory
except ImportError:
    from factrl.train.grpo import make_env_factory as factory
from factrl.datasets import load_dataset
claims = [c for c in load_dataset("scifact", Path(args.data_dir), "train").claims if c.evidence][:8]
make_env = factory(cfg)
lm = load_lm("smollm2")
rc = RolloutConfig(group=4, temperature=1.0, max_new_tokens=128, max_total_tokens=128, batch_size=32, seed=0)
run_episodes(make_env, claims[:2], lm, RolloutConfig(group=1, max_new_tokens=8, max_total_tokens=8))  # warm-up
out = []
for rep in range(2):
    t = time.perf_counter()
    trajs = run_episodes(make_env, claims, lm, rc)
    out.append({"seconds": time.perf_counter() - t, "tokens": sum(t.meta["completion_tokens"] for t in trajs)})
print(json.dumps({"code": args.label, "runs": out}))
