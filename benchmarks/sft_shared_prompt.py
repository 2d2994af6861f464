"""SFT with and without the shared prompts run once (factrl.train.shared_prompt).

Reads a teacher's trajectories (a factworld run's ``teach/trajectories.jsonl``), builds the
warm-up's examples as ``factrl train factworld`` does, and trains the first ``--steps``
steps of the same schedule twice from the same seed, once with every row whole
(``shared_prompt_tokens=0``) and once with the shared prompts, in each ``--dtype``:
seconds per step, each step's loss and the largest difference between the two adapters.

  PYTHONPATH=src python benchmarks/sft_shared_prompt.py runs/hw/teach/trajectories.jsonl \\
      --steps 12 --dtype float32 --dtype bfloat16 --out runs/sft_shared_prompt
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trajectories", type=Path)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--dtype", action="append", default=None, help="float32 / bfloat16 (repeatable)")
    ap.add_argument("--tokens-per-batch", type=int, default=2048)
    ap.add_argument("--lora-layers", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path("runs/sft_shared_prompt"))
    a = ap.parse_args(argv)

    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from factrl.lm.loader import resolve_model_path
    from factrl.runs.trajectories import read_trajectories
    from factrl.train.weighted_sft import WeightedSFTSettings, length_batches, train_weighted_sft, weighted_examples

    torch.set_num_threads(max(1, torch.get_num_threads()))
    path = resolve_model_path("smollm2")
    trajs = [t for t in read_trajectories(a.trajectories) if not t.error and t.verdict.format_ok]
    examples, _ = weighted_examples(trajs, AutoTokenizer.from_pretrained(path), decision_weight=1.0, max_length=1024)
    batches = length_batches([len(x["input_ids"]) for x in examples], a.tokens_per_batch, 0)
    epochs = min(1.0, a.steps / len(batches))
    report = {"examples": len(examples), "tokens": sum(len(x["input_ids"]) for x in examples),
              "steps": round(len(batches) * epochs), "runs": {}}
    for dtype in a.dtype or ["float32", "bfloat16"]:
        adapters = {}
        for tokens in (0, 64):
            out = a.out / f"{dtype}-shared{tokens}"
            shutil.rmtree(out, ignore_errors=True)
            train_weighted_sft(examples, path, out, WeightedSFTSettings(
                learning_rate=1e-3, epochs=epochs, tokens_per_batch=a.tokens_per_batch, decision_weight=1.0,
                max_length=1024, lora_layers=a.lora_layers, device="cpu", dtype=dtype, shared_prompt_tokens=tokens))
            log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
            seconds = [log[0]["seconds"]] + [y["seconds"] - x["seconds"] for x, y in zip(log, log[1:])]
            settings = json.loads((out / "settings.json").read_text())
            report["runs"][f"{dtype}-shared{tokens}"] = {
                "seconds": log[-1]["seconds"], "median_step_s": statistics.median(seconds),
                "losses": [x["loss"] for x in log], "shared_prompts": settings["shared_prompts"],
                "shared_prompt_tokens_saved": settings["shared_prompt_tokens_saved"]}
            adapters[tokens] = load_file(str(out / "adapter" / "adapter_model.safetensors"))
        diff = max(float((adapters[0][k] - adapters[64][k]).abs().max()) for k in adapters[0])
        scale = max(float(adapters[0][k].abs().max()) for k in adapters[0])
        report["runs"][f"{dtype}-adapter_max_abs_diff"] = diff
        report["runs"][f"{dtype}-adapter_max_abs"] = scale
        whole, shared = (report["runs"][f"{dtype}-shared{t}"] for t in (0, 64))
        print(f"{dtype}: {report['steps']} steps, whole rows {whole['seconds']:.1f} s "
              f"(median {whole['median_step_s']:.2f} s a step), shared prompts {shared['seconds']:.1f} s "
              f"(median {shared['median_step_s']:.2f}); loss difference max "
              f"{max(abs(x - y) for x, y in zip(whole['losses'], shared['losses'])):.2e}; "
              f"adapters differ by at most {diff:.2e} (largest weight {scale:.2e})", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
