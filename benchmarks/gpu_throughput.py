"""Decode and GRPO throughput on one GPU, with no model weights to bring.

Random-weight models from the SmolLM2-135M, Qwen2.5-0.5B and Qwen2.5-1.5B configurations
(written below; same shapes, so the same speed as the real ones) and SmolLM2's tokenizer.
Prints one JSON line per figure and writes them all to ``--out``:

- decode tok/s, ``rows`` x ``--new`` tokens from one ~150-token prompt, at batch 32 and
  256: plain transformers ``generate`` (dynamic cache, sampling, top_k=0), factrl's eager
  loop (``HFLM(engine="off")``) and the decode engine (``engine="on"``; its first call,
  which captures the CUDA graphs, is timed apart);
- agreement of the engine with the eager loop (greedy, 32 rows x 64 tokens): the share of
  rows with identical tokens and the largest logprob difference (bf16: small differences
  in the forward pass can flip a near-tie);
- seconds per GRPO update, online Veri-R1 (``veri_r1_online_cpu`` with bf16, BM25 over the
  bundled demo corpus, the demo claims repeated), at ``--grpo`` shapes (prompts x rollouts).

One command on a GPU machine with no network (wheels for what it lacks in ``.whl/``; the
script installs them into ``--work``/site and re-runs itself with them on PYTHONPATH)::

    python3 benchmarks/gpu_throughput.py --wheels .whl --tokenizer .dev/tok --out $OUT/gpu.json

On a CPU (a dry run of the script itself): ``--models tiny-llama --grpo-model tiny-llama
--batches 4 --new 8 --grpo 2x2 --grpo-steps 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# GPU images often carry JAX, which takes 75 % of the card when anything touches it
# (`import factrl` sets this too; the script's own process may touch it first).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

CONFIGS = {
    "smollm2-135m": dict(
        architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=576, intermediate_size=1536,
        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, head_dim=64, vocab_size=49152,
        max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
        hidden_act="silu", bos_token_id=1, eos_token_id=2, pad_token_id=2,
    ),
    "qwen2.5-0.5b": dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=896, intermediate_size=4864,
        num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
        hidden_act="silu", use_sliding_window=False, bos_token_id=1, eos_token_id=2,
    ),
    "qwen2.5-1.5b": dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=1536, intermediate_size=8960,
        num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
        hidden_act="silu", use_sliding_window=False, bos_token_id=1, eos_token_id=2,
    ),
    # for dry runs of this script on a CPU
    "tiny-llama": dict(
        architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64, intermediate_size=176,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=49152,
        max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
        hidden_act="silu", bos_token_id=1, eos_token_id=2, pad_token_id=2,
    ),
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json",
                   "generation_config.json")


def emit(results: list[dict], row: dict) -> None:
    results.append(row)
    print(json.dumps(row), flush=True)


def find_tokenizer(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    from factrl.lm.embedded import ensure_embedded_model

    return Path(ensure_embedded_model())


def build_model(name: str, tok_dir: Path, root: Path, device: str, dtype) -> Path:  # noqa: ANN001
    """A random-weight model of ``name``'s shapes saved with the tokenizer (seed 0); a
    ``name`` that is a model folder (real weights, e.g. the embedded model's cache) as is."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if name not in CONFIGS and (Path(name) / "config.json").is_file():
        return Path(name)
    out = root / name
    if (out / "config.json").is_file():
        return out
    spec = dict(CONFIGS[name])
    cfg = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.save_pretrained(out)
    for f in TOKENIZER_FILES:
        if (tok_dir / f).is_file():
            shutil.copy(tok_dir / f, out / f)
    del model
    return out


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def decode_figures(name: str, path: Path, args: argparse.Namespace, results: list[dict]) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from factrl.lm.base import GenerationConfig
    from factrl.lm.hf import HFLM

    dev = args.device
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=args.torch_dtype).to(dev).eval()
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Verify the claim: vitamin D deficiency is linked to multiple sclerosis. " * 8}],
        tokenize=False, add_generation_prompt=True)
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    new = args.new
    base = {"model": name, "dtype": args.dtype, "device": dev, "prompt_tokens": len(prompt), "new_tokens": new}
    for batch in args.batches:
        ids = torch.tensor([prompt] * batch, device=dev)
        attn = torch.ones_like(ids)
        kw = dict(attention_mask=attn, do_sample=True, temperature=1.0, top_k=0, pad_token_id=tok.eos_token_id)
        with torch.no_grad():
            model.generate(ids[:2], max_new_tokens=4, min_new_tokens=4, **{**kw, "attention_mask": attn[:2]})
            sync()
            t = time.perf_counter()
            out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, **kw)
            sync()
            dt = time.perf_counter() - t
        hf_rate = (out.shape[1] - len(prompt)) * batch / dt
        emit(results, {**base, "path": "hf_generate", "batch": batch, "seconds": round(dt, 3), "tok_per_s": round(hf_rate)})
        cfg = GenerationConfig(max_new_tokens=new, temperature=1.0, seed=0)
        for mode in ("off", "on"):
            lm = HFLM(model, tok, max_batch_size=batch, engine=mode)
            warm = None
            if mode == "on":
                t = time.perf_counter()
                lm.generate([prompt] * batch, cfg)
                sync()
                warm = round(time.perf_counter() - t, 3)
            else:
                lm.generate([prompt] * 2, GenerationConfig(max_new_tokens=4, temperature=1.0))
            sync()
            t = time.perf_counter()
            gens = lm.generate([prompt] * batch, cfg)
            sync()
            dt = time.perf_counter() - t
            n = sum(len(g.token_ids) for g in gens)
            row = {**base, "path": "factrl_engine" if mode == "on" else "factrl_eager", "batch": batch,
                   "seconds": round(dt, 3), "tokens": n, "tok_per_s": round(n / dt), "x_hf_generate": round(n / dt / hf_rate, 2)}
            if warm is not None:
                row["first_call_s"] = warm
            emit(results, row)
    # Agreement with the eager loop (greedy).
    rows = [prompt[: len(prompt) - (i % 7)] for i in range(32)]
    cfg = GenerationConfig(max_new_tokens=64, temperature=0.0)
    a = HFLM(model, tok, max_batch_size=32, engine="off").generate(rows, cfg)
    b = HFLM(model, tok, max_batch_size=32, engine="on").generate(rows, cfg)
    same = sum(x.token_ids == y.token_ids for x, y in zip(a, b))
    diff = max(abs(p - q) for x, y in zip(a, b) if x.token_ids == y.token_ids for p, q in zip(x.logprobs, y.logprobs)) if same else None
    emit(results, {**base, "path": "engine_vs_eager_greedy", "rows": len(rows), "identical_rows": same,
                   "max_logprob_diff_on_identical": diff})
    cfg = GenerationConfig(max_new_tokens=64, temperature=1.0, seed=5)
    a = HFLM(model, tok, max_batch_size=32, engine="off").generate(rows, cfg)
    b = HFLM(model, tok, max_batch_size=32, engine="on").generate(rows, cfg)
    prefix = [next((k for k, (p, q) in enumerate(zip(x.token_ids, y.token_ids)) if p != q), len(x.token_ids))
              for x, y in zip(a, b)]
    emit(results, {**base, "path": "engine_vs_eager_sampled", "rows": len(rows),
                   "identical_rows": sum(x.token_ids == y.token_ids for x, y in zip(a, b)),
                   "mean_identical_prefix": round(sum(prefix) / len(prefix), 1)})
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def demo_data(root: Path, copies: int) -> tuple[Path, Path]:
    """The bundled demo corpus and its claims repeated ``copies`` times (distinct ids)."""
    from importlib.resources import files

    demo = files("factrl") / "demo"
    corpus = root / "demo-corpus.jsonl"
    corpus.write_text((demo / "corpus.jsonl").read_text())
    rows = [json.loads(line) for line in (demo / "claims.jsonl").read_text().splitlines() if line.strip()]
    claims_dir = root / "demo-claims"
    claims_dir.mkdir(parents=True, exist_ok=True)
    with open(claims_dir / "train.jsonl", "w") as f:
        for k in range(copies):
            for r in rows:
                f.write(json.dumps({**r, "id": f"{r['id']}-{k}"}) + "\n")
    return corpus, claims_dir


def grpo_figures(path: Path, args: argparse.Namespace, results: list[dict]) -> None:
    root = Path(args.work)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.grpo]
    most = max(p for p, _ in shapes)
    corpus, claims = demo_data(root, copies=max(2, 3 * most // 14 + 2))
    index = root / "demo-index"
    cli = [sys.executable, "-c", "from factrl.cli import main; main()"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    subprocess.run([*cli, "index", "build", "--overwrite", "--corpus", str(corpus), "--out", str(index)],
                   check=True, capture_output=True, env=env)
    for prompts, rollouts in shapes:
        out = root / f"grpo_{prompts}x{rollouts}"
        shutil.rmtree(out, ignore_errors=True)
        sets = {
            "model.id": str(path), "env.index": str(index), "data.dataset": "jsonl", "data.data_dir": str(claims),
            "data.held_out_fraction": 0.1, "grpo.max_steps": args.grpo_steps, "grpo.max_minutes": 5,
            "grpo.prompts_per_generation": prompts, "grpo.prompts_per_update": prompts, "grpo.num_generations": rollouts,
            "grpo.micro_batch_size": min(prompts * rollouts, 64), "rollout.batch_size": prompts * rollouts,
            "grpo.save_steps": 1000, "grpo.bf16": args.dtype == "bfloat16",
        }
        cmd = [*cli, "train", "grpo", "--config", "veri_r1_online_cpu", "--out", str(out)]
        for k, v in sets.items():
            cmd += ["--set", f"{k}={json.dumps(v) if isinstance(v, bool) else v}"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.grpo_timeout)
        wall = time.perf_counter() - t
        row = {"path": "grpo_update", "preset": "veri_r1_online_cpu", "prompts": prompts, "rollouts": rollouts,
               "rc": proc.returncode, "wall_s": round(wall, 1)}
        log = out / "metrics.jsonl"
        stamps = []
        if log.is_file():
            stamps = [r["wall_time"] for r in map(json.loads, log.read_text().splitlines())
                      if "reward" in r and "wall_time" in r]
        steps = [b - a for a, b in zip(stamps, stamps[1:])]  # seconds between consecutive updates
        if steps:
            row["update_seconds"] = [round(s, 2) for s in steps]
            row["median_update_s"] = round(sorted(steps)[len(steps) // 2], 2)
        if proc.returncode:
            row["stderr_tail"] = proc.stderr[-1500:]
        emit(results, row)


def install_wheels(wheels: Path, site: Path) -> None:
    """Install every wheel in ``wheels`` (no index, no dependencies) into ``site``, then
    re-run this script with ``site`` and the checkout's ``src`` first on PYTHONPATH (its
    subprocesses inherit it)."""
    whls = sorted(str(w) for w in Path(wheels).glob("*.whl"))
    if not whls:
        sys.exit(f"--wheels {wheels}: no .whl files there")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--upgrade", "--target", str(site), *whls], check=True)
    src = Path(__file__).resolve().parents[1] / "src"
    path = [str(site), str(src), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "FACTRL_BENCH_SITE": str(site)}
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]], env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", help="A folder of wheels for what this machine lacks (installed, then the "
                    "script re-runs itself with them).")
    ap.add_argument("--tokenizer", help="A folder with SmolLM2's tokenizer files (default: the embedded model's).")
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-0.5b,qwen2.5-1.5b",
                    help="configurations above (random weights) or model folders (real weights)")
    ap.add_argument("--grpo-model", default="smollm2-135m")
    ap.add_argument("--batches", default="32,256")
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on CUDA, float32 on CPU")
    ap.add_argument("--grpo", default="4x8,32x8", help="prompts x rollouts per update ('' to skip)")
    ap.add_argument("--grpo-steps", type=int, default=4)
    ap.add_argument("--grpo-timeout", type=int, default=240)
    ap.add_argument("--work", default="/tmp/factrl-gpu-bench")
    ap.add_argument("--out", default=None)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: one model's decode figures, in this process
    args = ap.parse_args()
    if args.wheels and not os.environ.get("FACTRL_BENCH_SITE"):
        install_wheels(Path(args.wheels), Path(args.work) / "site")
    import torch

    args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    args.torch_dtype = getattr(torch, args.dtype)
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.grpo = [s for s in args.grpo.split(",") if s]
    results: list[dict] = []
    info = {"path": "machine", "torch": torch.__version__, "device": args.device,
            "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None}
    import transformers

    info["transformers"] = transformers.__version__
    if not args.one:
        emit(results, info)
    tok_dir = find_tokenizer(args.tokenizer)
    root = Path(args.work)
    root.mkdir(parents=True, exist_ok=True)
    if args.one:
        decode_figures(args.one, build_model(args.one, tok_dir, root, args.device, args.torch_dtype), args, [])
        return
    t0 = time.perf_counter()
    paths = {}
    for name in [m for m in args.models.split(",") if m]:
        # one process per model: a failure (or a device fault) loses that model's figures only
        paths[name] = build_model(name, tok_dir, root, args.device, args.torch_dtype)
        cmd = [sys.executable, __file__, "--one", name, "--tokenizer", str(tok_dir), "--batches",
               ",".join(map(str, args.batches)), "--new", str(args.new), "--dtype", args.dtype, "--work", str(root)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                emit(results, json.loads(line))
        if proc.returncode:
            emit(results, {"model": name, "path": "decode", "rc": proc.returncode,
                           "stderr_tail": "\n".join(l for l in proc.stderr.splitlines() if "Warn" not in l)[-1500:]})
        print(f"# {name} done at {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))
    if args.grpo:
        name = args.grpo_model
        smol = paths.get(name) or build_model(name, tok_dir, root, args.device, args.torch_dtype)
        grpo_figures(smol, args, results)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
