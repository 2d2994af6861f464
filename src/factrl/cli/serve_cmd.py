"""``factrl serve retriever``: serve an index over HTTP (Search-R1's ``/retrieve``)."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli.app import serve_app


@serve_app.command("retriever")
def serve_retriever(
    index: Path = typer.Option(..., "--index", help="Index directory built by `factrl index build`."),
    host: str = typer.Option("127.0.0.1", help="Address to bind; 0.0.0.0 exposes the server to the network."),
    port: int = typer.Option(8000, min=0, max=65535),
    max_batch: int = typer.Option(256, min=1, help="Most queries in one request."),
    max_k: int = typer.Option(100, min=1, help="Largest topk a request may ask for."),
    max_query_chars: int = typer.Option(2000, min=1, help="Longest query, in characters."),
    timeout: float = typer.Option(30.0, min=0.001, help="Seconds a request waits for its search (then 504)."),
    cache_size: int = typer.Option(100_000, min=0, help="Results kept in the in-memory cache (0: no cache)."),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
    torch_threads: int = typer.Option(
        0, min=0, help="Threads for query encoding (dense/hybrid). 0: OMP_NUM_THREADS if set, else the CPU "
        "count minus 2 (at least 1), leaving cores to the event loop and clients."),
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
        idx = load_index(index)
        limits = ServerLimits(max_batch=max_batch, max_k=max_k, max_query_chars=max_query_chars, timeout=timeout,
                              default_k=min(3, max_k))
    except (IndexMismatchError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if threads and "torch" in sys.modules:  # already loaded by a dense backend: apply it there too
        sys.modules["torch"].set_num_threads(threads)
    app = create_app(idx, limits=limits, info=index_info(idx), cache_size=cache_size)
    typer.echo(f"serving {idx!r} on http://{host}:{port} (POST /retrieve, GET /health)", err=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
