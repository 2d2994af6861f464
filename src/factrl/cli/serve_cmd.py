"""``factrl serve retriever`` (an index over Search-R1's ``/retrieve``) and ``factrl serve lm``
(an LM over an OpenAI-compatible ``/v1/chat/completions``)."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli._common import DEVICE_HELP, DTYPE_HELP
from factrl.cli.app import serve_app
from factrl.cli.search_cmd import KERNEL_HELP, THREADS_HELP, load_options

BODY_TIMEOUT_HELP = "Seconds a request's body may take to arrive in full (then 408 and the connection is closed)."


@serve_app.command("retriever")
def serve_retriever(
    index: Path = typer.Option(..., "--index", help="Index directory built by `factrl index build`."),
    host: str = typer.Option("127.0.0.1", help="Address to bind; 0.0.0.0 exposes the server to the network."),
    port: int = typer.Option(8000, min=0, max=65535),
    max_batch: int = typer.Option(256, min=1, help="Most queries in one request."),
    max_k: int = typer.Option(100, min=1, help="Largest topk a request may ask for."),
    max_query_chars: int = typer.Option(2000, min=1, help="Longest query, in characters."),
    timeout: float = typer.Option(30.0, min=0.001, help="Seconds a request waits for its search (then 504)."),
    body_timeout: float = typer.Option(10.0, min=0.001, help=BODY_TIMEOUT_HELP),
    cache_size: int = typer.Option(100_000, min=0, help="Results kept in the in-memory cache (0: no cache)."),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
    torch_threads: int = typer.Option(
        0, min=0, help="Threads for query encoding (dense/hybrid). 0: OMP_NUM_THREADS if set, else the CPU "
        "count minus 2 (at least 1), leaving cores to the event loop and clients."),
    search_threads: int = typer.Option(0, "--search-threads", min=0, help=THREADS_HELP),
    kernel: str = typer.Option(None, "--kernel", help=KERNEL_HELP),
) -> None:
    """Load INDEX once and answer POST /retrieve and GET /health."""
    import os
    import sys

    import uvicorn

    # Encoder threads that compete with the event loop for cores spin-wait for each other:
    # on 2 cores, 2 torch threads served dense queries 4x slower than 1 (docs/benchmarks.md).
    if torch_threads == 0 and "OMP_NUM_THREADS" in os.environ:
        threads = 0
    else:
        threads = torch_threads or max(1, (os.cpu_count() or 1) - 2)
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read by torch and faiss when they load

    from factrl.retrieval.base import IndexMismatchError
    from factrl.retrieval.index import load_index
    from factrl.retrieval.server import ServerLimits, create_app, index_info

    try:
        idx = load_index(index, options=load_options(search_threads, kernel))
        limits = ServerLimits(max_batch=max_batch, max_k=max_k, max_query_chars=max_query_chars, timeout=timeout,
                              default_k=min(3, max_k), body_timeout=body_timeout)
    except (IndexMismatchError, ValueError, ImportError, KeyError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if threads and "torch" in sys.modules:  # already loaded by a dense backend: apply it there too
        sys.modules["torch"].set_num_threads(threads)
    app = create_app(idx, limits=limits, info=index_info(idx), cache_size=cache_size)
    typer.echo(f"serving {idx!r} on http://{host}:{port} (POST /retrieve, GET /health)", err=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


@serve_app.command("lm")
def serve_lm(
    model: str = typer.Option("smollm2", "--model", help="'smollm2' (embedded), a local model directory or a hub id."),
    served_name: str = typer.Option(None, "--served-name", help="Model id in the API (default: --model)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind; 0.0.0.0 exposes the server to the network."),
    port: int = typer.Option(8001, min=0, max=65535),
    device: str = typer.Option(None, "--device", help=DEVICE_HELP, show_default="auto"),
    dtype: str = typer.Option(None, "--dtype", help=DTYPE_HELP, show_default="auto"),
    max_batch: int = typer.Option(None, "--max-batch", min=1, show_default="32 on CPU, 256 on CUDA",
                                  help="Most rows (choices) generated in one call."),
    batch_window_ms: float = typer.Option(10.0, min=0.0, help="Milliseconds a batch waits for more requests."),
    max_queue: int = typer.Option(256, min=1, help="Rows that may wait for the model; more get 503."),
    max_tokens: int = typer.Option(2048, min=1, help="Largest max_tokens a request may ask for."),
    max_n: int = typer.Option(16, min=1, help="Largest n (choices per request)."),
    timeout: float = typer.Option(120.0, min=0.001, help="Seconds a request waits for its generation (then 504)."),
    body_timeout: float = typer.Option(10.0, min=0.001, help=BODY_TIMEOUT_HELP),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
    torch_threads: int = typer.Option(0, min=0, help="torch threads (0: torch's default)."),
) -> None:
    """Serve an LM behind POST /v1/chat/completions and GET /v1/models (OpenAI-compatible)."""
    import os

    from factrl.lm.loader import is_packaged

    if is_packaged(model):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from dataclasses import replace

    import uvicorn

    from factrl.lm.chat_request import LMServerLimits
    from factrl.lm.device import DeviceError, resolve_device, resolve_dtype
    from factrl.lm.loader import LMLoadError, load_lm, remote_backend
    from factrl.lm.server import create_lm_app

    try:
        if remote_backend(model) is not None:
            raise LMLoadError(f"{model!r} is already served behind an API; serve a local model")
        limits = LMServerLimits(max_batch=max_batch or 1, batch_window=batch_window_ms / 1000, max_queue=max_queue,
                                max_tokens=max_tokens, max_n=max_n, timeout=timeout, body_timeout=body_timeout)
        resolved = resolve_device(device)
        lm = load_lm(model, device=resolved, dtype=resolve_dtype(dtype, resolved), max_batch_size=max_batch)
        limits = replace(limits, max_batch=lm.max_batch_size)  # --max-batch, or the device's default
    except (LMLoadError, DeviceError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if torch_threads:
        import torch

        torch.set_num_threads(torch_threads)
    name = served_name or model
    app = create_lm_app(lm, model_id=name, limits=limits, aliases=[lm.name])
    where = ", ".join(f"{k} {v}" for k, v in lm.runtime_info().items())
    typer.echo(f"serving {name} on http://{host}:{port}/v1 (POST /v1/chat/completions, GET /v1/models; {where})",
               err=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
