"""``factrl search``: batched retrieval for a file of queries, written as JSON lines."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import typer

from factrl.cli.app import app

THREADS_HELP = ("BM25: threads that rank a batch's queries at once (0: one; the numba kernel releases the GIL, "
                "so threads use cores).")
KERNEL_HELP = ("BM25 top-k kernel: auto (maxscore when numba is installed, else numpy), maxscore, numba, numpy, "
               "or reference (bm25s's dense scorer, the path before memory-mapped indexes). Results are the same.")


def load_options(threads: int, kernel: str | None) -> dict[str, Any]:
    """``load_index`` options from ``--threads``/``--kernel`` (only those given)."""
    options: dict[str, Any] = {}
    if threads:
        options["n_threads"] = threads
    if kernel:
        options["kernel"] = kernel
    return options


def read_queries(path: Path) -> list[tuple[Any, str]]:
    """``{"id", "text"}`` per line → ``[(id, text)]``; a malformed line raises ValueError
    naming the file and line."""
    from factrl.corpus import RowError, iter_json_lines

    queries: list[tuple[Any, str]] = []
    for line_no, row in iter_json_lines(path):
        where = f"{path}:{line_no}"
        if isinstance(row, RowError):
            raise ValueError(str(row))
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a JSON object with 'id' and 'text'")
        if "id" not in row or isinstance(row["id"], bool) or not isinstance(row["id"], (str, int)):
            raise ValueError(f"{where}: 'id' must be present and a string or integer")
        if not isinstance(row.get("text"), str):
            raise ValueError(f"{where}: 'text' must be present and a string")
        queries.append((row["id"], row["text"]))
    return queries


@app.command("search")
def search(
    index: Path = typer.Option(..., "--index", help="Index directory (factrl index build)."),
    queries: Path = typer.Option(..., "--queries", help='JSON lines {"id", "text"}.'),
    out: Path = typer.Option(..., "--out", help="Output JSON lines, one per query."),
    k: int = typer.Option(100, "--k", min=1, help="Hits per query."),
    batch_size: int = typer.Option(256, "--batch-size", min=1, help="Queries per retriever call."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    threads: int = typer.Option(0, "--threads", min=0, help=THREADS_HELP),
    kernel: str = typer.Option(None, "--kernel", help=KERNEL_HELP),
) -> None:
    """Search an index for every query; write ``{"id", "hits": [{passage_id, doc_id, score}]}``."""
    from tqdm import tqdm

    from factrl.retrieval.base import IndexMismatchError
    from factrl.retrieval.index import load_index

    try:
        qs = read_queries(queries)
        idx = load_index(index, options=load_options(threads, kernel))
    except (ValueError, FileNotFoundError, IndexMismatchError, ImportError, KeyError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with out.open("w", encoding="utf-8") as fh, tqdm(total=len(qs), desc="search", unit="q", file=sys.stderr, disable=quiet) as bar:
        for start in range(0, len(qs), batch_size):
            batch = qs[start : start + batch_size]
            for (qid, _), hits in zip(batch, idx.search([text for _, text in batch], k)):
                rows = [{"passage_id": h.passage_id, "doc_id": h.doc_id, "score": h.score} for h in hits]
                fh.write(json.dumps({"id": qid, "hits": rows}, ensure_ascii=False) + "\n")
            bar.update(len(batch))
    seconds = time.perf_counter() - t0
    rate = len(qs) / seconds if seconds > 0 else float("inf")
    typer.echo(f"Searched {len(qs)} queries (k={k}) in {seconds:.2f}s ({rate:.0f} queries/s) → {out}")
