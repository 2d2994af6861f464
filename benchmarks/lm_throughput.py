"""Generation throughput of the embedded SmolLM2-135M-Instruct (fp32, CPU) through ``HFLM``.

For each batch size, B different Veri-R1 online prompts (Figure 9 text + a claim, chat
template applied; the protocol's head is cut so each prompt has ``--prompt-tokens``
tokens, 300 by default) are continued by exactly ``--new-tokens`` sampled tokens
(temperature 0.8; EOS is masked out so no row stops early, which keeps the batch full
for the whole run). ``--group G`` repeats each claim G times, as GRPO rollouts do. Reported: wall time, generated tokens/s, and the prefill time
(the same batch with one new token). Also times the first load (GGUF → fp32 → verified
safetensors cache, in a fresh temporary cache) against a load from the cache.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/lm_throughput.py [--batch-sizes 1 8 32]
        [--new-tokens 128] [--prompt-tokens 300] [--group 1] [--threads N] [--dtype bfloat16] [--skip-load]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from datetime import datetime, timezone

import torch

from factrl.envs.prompts import VERI_R1_ONLINE
from factrl.lm import GenerationConfig, load_lm
from factrl.lm.hf import HFLM
from factrl.types import Message

CLAIMS = [
    "The Nile flows north into the Mediterranean Sea.",
    "Marie Curie won two Nobel Prizes in different sciences.",
    "The Great Wall of China is visible from the Moon with the naked eye.",
    "Mount Everest is the tallest mountain measured from base to peak.",
    "Vitamin C supplements prevent the common cold in the general population.",
    "The Eiffel Tower was built for the 1889 World's Fair in Paris.",
    "Bats are blind and navigate only by echolocation.",
    "Honey found in ancient Egyptian tombs was still edible.",
]


def _prompts(lm: HFLM, n: int, target: int, group: int = 1) -> list[list[int]]:
    """``n`` chat prompts: Figure 9's protocol (its head cut so the whole prompt is about
    ``target`` tokens; 0 keeps it whole) followed by "Verify the claim:" and a claim;
    each claim repeated ``group`` times in a row, as a GRPO rollout batch is."""
    out = []
    for i in (k // group for k in range(n)):
        claim = CLAIMS[i % len(CLAIMS)] + (f" (case {i})" if i >= len(CLAIMS) else "")
        head, _, _ = VERI_R1_ONLINE.format(max_searches=3, claim=claim).partition("Verify the claim:")
        tail = f"Verify the claim:\n{claim}\n"
        if target:
            frame = len(lm.chat_prompt_ids([Message(role="user", content=tail)]))
            head = lm.decode(lm.encode(head)[: max(0, target - frame)])
        out.append(lm.chat_prompt_ids([Message(role="user", content=head + tail)]))
    return out


def _time_load(skip: bool) -> dict[str, float]:
    if skip:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        old = os.environ.get("FACTRL_CACHE")
        os.environ["FACTRL_CACHE"] = tmp
        try:
            from factrl.lm.embedded import ensure_embedded_model

            start = time.perf_counter()
            path = ensure_embedded_model()  # GGUF read + de-quantise + save + reload check
            convert = time.perf_counter() - start
            start = time.perf_counter()
            HFLM.load(str(path))
            cached = time.perf_counter() - start
        finally:
            if old is None:
                os.environ.pop("FACTRL_CACHE", None)
            else:
                os.environ["FACTRL_CACHE"] = old
    return {"first_load_from_gguf_s": convert, "load_from_cache_s": cached}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=300, help="about this many prompt tokens (0: whole Figure 9)")
    ap.add_argument("--group", type=int, default=1, help="rows per claim (GRPO group); identical prompts are prefilled once")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--dtype", default="float32", help="float32 / bfloat16 weights (bf16: FACTRL_CPU_ATTENTION applies)")
    ap.add_argument("--skip-load", action="store_true", help="skip the GGUF-vs-cache load timing")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    load_avg_before = os.getloadavg()
    loads = _time_load(args.skip_load)
    lm = load_lm("smollm2", max_batch_size=max(args.batch_sizes), device="cpu", dtype=args.dtype)
    eos = sorted(lm.eos_token_ids)

    def no_eos(module, inputs, output):  # keep every row generating for the whole run
        output[..., eos] = float("-inf")
        return output

    lm.model.lm_head.register_forward_hook(no_eos)
    lm.generate(_prompts(lm, 1, args.prompt_tokens), GenerationConfig(max_new_tokens=4, seed=0))  # warm-up

    rows = []
    for bs in args.batch_sizes:
        prompts = _prompts(lm, bs, args.prompt_tokens, args.group)
        start = time.perf_counter()
        lm.generate(prompts, GenerationConfig(max_new_tokens=1, temperature=0.8, seed=0))
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        gens = lm.generate(prompts, GenerationConfig(max_new_tokens=args.new_tokens, temperature=0.8, seed=0))
        wall = time.perf_counter() - start
        generated = sum(len(g.token_ids) for g in gens)
        rows.append({
            "batch": bs, "group": args.group, "prompt_tokens_mean": sum(map(len, prompts)) / bs, "new_tokens": generated,
            "wall_s": wall, "prefill_s": prefill, "tokens_per_s": generated / wall,
            "decode_tokens_per_s": (generated - bs) / max(wall - prefill, 1e-9),
        })
        print(json.dumps(rows[-1]), flush=True)

    info = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.platform()}",
        "torch": torch.__version__, "threads": torch.get_num_threads(), "runtime": lm.runtime_info(),
        "load_avg_before": load_avg_before, "load_avg_after": os.getloadavg(),
        **loads, "rows": rows,
    }
    print("\n| batch | prompt tok (mean) | new tok | wall s | prefill s | gen tok/s | decode tok/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['prompt_tokens_mean']:.0f} | {r['new_tokens']} | {r['wall_s']:.1f} | "
              f"{r['prefill_s']:.2f} | {r['tokens_per_s']:.1f} | {r['decode_tokens_per_s']:.1f} |")
    if loads:
        print(f"\nfirst load from GGUF (convert + save + verify): {loads['first_load_from_gguf_s']:.1f} s; "
              f"load from the safetensors cache: {loads['load_from_cache_s']:.1f} s")
    print(f"threads {info['threads']}, load average before {load_avg_before}, after {info['load_avg_after']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(info, fh, indent=2)


if __name__ == "__main__":
    main()
