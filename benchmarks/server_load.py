"""Load test of ``factrl serve retriever`` from a second process.

Starts the server on 127.0.0.1 in a subprocess (or targets ``--url``), then runs
``--concurrency`` clients — each its own ``httpx.AsyncClient`` and connection — that
together send ``--requests`` POST /retrieve requests of ``--batch`` SciFact claims each,
and reports requests/s, latency percentiles and errors (any non-200 answer or
transport failure).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/server_load.py --index /tmp/bench/ix-bm25 \
        --concurrency 64 --requests 2000

``--unique`` appends the request number to each query so that no request is a cache hit.
``--claims`` may also be a queries file of ``factrl search`` (``{"id", "text"}`` lines),
e.g. the synthetic Wikipedia's of ``benchmarks/retrieval_scale.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import numpy as np

CLAIMS = Path("/work/shared/data/scifact/claims_train.jsonl")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(index: Path, port: int, cache_size: int, extra: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from factrl.cli import main; main()", "serve", "retriever", "--index", str(index),
           "--host", "127.0.0.1", "--port", str(port), "--cache-size", str(cache_size), *extra]
    return subprocess.Popen(cmd, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def wait_healthy(url: str, proc: subprocess.Popen | None, limit: float = 600.0) -> dict:
    deadline = time.monotonic() + limit
    while True:
        try:
            return httpx.get(f"{url}/health", timeout=5).json()
        except httpx.HTTPError:
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                raise SystemExit(f"server at {url} did not come up") from None
            time.sleep(0.5)


async def run_load(url: str, queries: list[str], concurrency: int, n_requests: int, batch: int, topk: int,
                   unique: bool, timeout: float) -> tuple[list[tuple[float, float]], list[str], float]:
    latencies: list[tuple[float, float]] = []  # (start offset, seconds)
    errors: list[str] = []
    counter = iter(range(n_requests))

    # Clients are made before the clock starts: making one builds an SSL context (tens of
    # ms of CPU), which would otherwise stall the loop and count as server latency.
    clients = [httpx.AsyncClient(timeout=timeout) for _ in range(concurrency)]

    async def worker(client: httpx.AsyncClient) -> None:
        for i in counter:
            qs = [queries[(i * batch + j) % len(queries)] for j in range(batch)]
            if unique:
                qs = [f"{q} #{i}" for q in qs]
            t0 = time.perf_counter()
            try:
                r = await client.post(f"{url}/retrieve", json={"queries": qs, "topk": topk, "return_scores": True})
                if r.status_code != 200 or len(r.json()["result"]) != batch:
                    errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            latencies.append((t0 - start, time.perf_counter() - t0))

    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    wall = time.perf_counter() - start
    await asyncio.gather(*(c.aclose() for c in clients))
    return latencies, errors, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, help="index directory to serve (a server is started)")
    ap.add_argument("--url", help="an already running server instead of --index")
    ap.add_argument("--claims", type=Path, default=CLAIMS)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=1, help="queries per request")
    ap.add_argument("--topk", type=int, default=3)
    ap.add_argument("--unique", action="store_true", help="make every query distinct (no cache hits)")
    ap.add_argument("--cache-size", type=int, default=100_000)
    ap.add_argument("--timeout", type=float, default=120.0, help="client timeout per request, seconds")
    ap.add_argument("--server-arg", action="append", default=[], help="extra argument for `factrl serve retriever`")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    if not (args.index or args.url):
        ap.error("give --index or --url")

    rows = [json.loads(line) for line in args.claims.open(encoding="utf-8") if line.strip()]
    queries = [row["claim"] if "claim" in row else row["text"] for row in rows]
    proc = None
    url = args.url
    if url is None:
        url = f"http://127.0.0.1:{free_port()}"
        proc = start_server(args.index, int(url.rsplit(":", 1)[1]), args.cache_size, args.server_arg)
    try:
        t0 = time.perf_counter()
        health = wait_healthy(url, proc)
        startup = time.perf_counter() - t0
        load0 = os.getloadavg()
        lat, errors, wall = asyncio.run(run_load(url, queries, args.concurrency, args.requests, args.batch, args.topk,
                                                 args.unique, args.timeout))
        after = httpx.get(f"{url}/health", timeout=10).json()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    ms = np.array([sec for _, sec in lat]) * 1000
    # Steady state: requests started after the first `concurrency` ones (connection set-up,
    # cold caches and first batches excluded).
    steady = np.array([sec for _, sec in sorted(lat)[args.concurrency:]]) * 1000
    res = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "command": " ".join(sys.argv),
        "retriever": health["index"].get("retriever"), "n_passages": health["index"].get("n_passages"),
        "concurrency": args.concurrency, "requests": args.requests, "batch": args.batch, "topk": args.topk,
        "unique": args.unique, "cache_size": args.cache_size, "server_startup_s": startup,
        "wall_s": wall, "requests_per_s": args.requests / wall, "queries_per_s": args.requests * args.batch / wall,
        "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
        "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()),
        "steady_p50_ms": float(np.percentile(steady, 50)), "steady_p99_ms": float(np.percentile(steady, 99)),
        "errors": len(errors), "first_errors": errors[:5],
        "backend_calls": after.get("backend_calls"), "cache": after.get("cache"),
        "load_average_start": load0, "load_average_end": os.getloadavg(),
    }
    print(json.dumps(res, indent=2))
    print(f"\n| {res['retriever']} | {args.concurrency} | {args.requests} | {args.batch} | "
          f"{'unique' if args.unique else 'claims (repeats)'} | {res['requests_per_s']:.1f} | {res['p50_ms']:.0f} | "
          f"{res['p99_ms']:.0f} | {res['steady_p50_ms']:.0f} / {res['steady_p99_ms']:.0f} | {res['errors']} | "
          f"{res['backend_calls']} |")
    if args.json_out:
        args.json_out.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
