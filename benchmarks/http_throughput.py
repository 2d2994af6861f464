"""Throughput of the HTTP LM path against ``factrl serve lm``, beside the in-process backend.

The same Veri-R1 online episodes (SciFact train claims that have evidence, BM25 over an
index you built with ``factrl index build``, greedy, ``--new-tokens`` per turn) run with
1, 4 and 16 episodes in flight: through ``openai:smollm2`` against a ``factrl serve lm``
subprocess started here on a free port (it batches concurrent requests), then through
the in-process ``HFLM`` with the same batch sizes. Reported per setting: wall seconds,
generated tokens/s (SmolLM2 tokens of the model turns' text) and episodes/s, and the speed-up over one episode at a time. Both
sides use ``--threads`` torch threads (the server via ``--torch-threads``).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/http_throughput.py \
        --index runs/scifact-index [--claims 16] [--concurrency 1 4 16] [--new-tokens 128] \
        [--threads 1] [--inprocess-concurrency 1 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(port: int, threads: int, max_batch: int) -> subprocess.Popen:
    cmd = [str(Path(sys.executable).with_name("factrl")), "serve", "lm", "--port", str(port), "--torch-threads", str(threads),
           "--max-batch", str(max_batch)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"factrl serve lm exited: {proc.stderr.read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("factrl serve lm did not come up within 300 s")


def _run(make_env, claims, lm, concurrency: int, new_tokens: int, count) -> dict:
    from factrl.rollout import RolloutConfig, run_episodes

    # The HTTP path's ids are characters, so an episode-wide token budget would mean
    # something else on each side: only the per-turn limit (server tokens there) and the
    # agent's turn limit bound these episodes.
    cfg = RolloutConfig(group=1, temperature=0.0, max_new_tokens=new_tokens, max_total_tokens=10**6,
                        batch_size=concurrency, seed=0)
    t = time.perf_counter()
    trajs = run_episodes(make_env, claims, lm, cfg, score=False)
    seconds = time.perf_counter() - t
    # generated tokens counted with SmolLM2's tokenizer on both sides
    tokens = sum(len(count(turn.text)) for tr in trajs for turn in tr.turns if turn.source == "model")
    errors = sum(1 for tr in trajs if tr.error)
    return {"concurrency": concurrency, "episodes": len(trajs), "seconds": round(seconds, 2), "tokens": tokens,
            "tokens_per_s": round(tokens / seconds, 2), "episodes_per_s": round(len(trajs) / seconds, 4),
            "errors": errors}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--data-dir", default="../shared/data/scifact")
    ap.add_argument("--claims", type=int, default=16)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="client seconds per request: a CPU server's batch of 16 takes minutes, "
                         "and a timed-out request is retried behind the still-running batch")
    ap.add_argument("--inprocess-concurrency", type=int, nargs="*", default=None,
                    help="batch sizes for the in-process side (default: --concurrency; none: skip it)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from factrl.datasets import load_dataset
    from factrl.components import RunSpec, build_components
    from factrl.lm.loader import load_lm

    claims = [c for c in load_dataset("scifact", Path(args.data_dir), "train").claims if c.evidence][: args.claims]
    make_env = build_components(RunSpec(index=str(args.index), load_policy=False)).make_env  # the default agent
    result: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.processor()
                    or platform.machine(), "cpus": os.cpu_count(), "threads": args.threads, "claims": len(claims),
                    "new_tokens": args.new_tokens, "timeout": args.timeout, "http": [], "in_process": []}

    local = load_lm("smollm2")
    port = _free_port()
    server = _start_server(port, args.threads, max_batch=max(args.concurrency))
    try:
        remote = load_lm("openai:smollm2", base_url=f"http://127.0.0.1:{port}/v1", max_concurrency=max(args.concurrency),
                         timeout=args.timeout)
        _run(make_env, claims[:2], remote, 2, 8, local.encode)  # warm-up: first requests, tokenizer, server batcher
        for c in args.concurrency:
            row = _run(make_env, claims, remote, c, args.new_tokens, local.encode)
            result["http"].append(row)
            print("http", json.dumps(row), flush=True)
    finally:
        server.terminate()  # a server inside a long batch may not stop gracefully in time
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    inprocess = args.concurrency if args.inprocess_concurrency is None else args.inprocess_concurrency
    if inprocess:
        _run(make_env, claims[:2], local, 2, 8, local.encode)
        for c in inprocess:
            row = _run(make_env, claims, local, c, args.new_tokens, local.encode)
            result["in_process"].append(row)
            print("in-process", json.dumps(row), flush=True)

    for side in ("http", "in_process"):
        rows = result[side]
        if rows:
            base = rows[0]["tokens_per_s"]
            for r in rows:
                r["speedup_vs_first"] = round(r["tokens_per_s"] / base, 2) if base else None
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
