"""``factrl index build`` and ``factrl index info``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from factrl.cli.app import index_app


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``["k1=1.2", "stemmer=none"]`` → ``{"k1": 1.2, "stemmer": "none"}``; a value is
    read as JSON when it parses (numbers, true/false, lists) and kept as a string otherwise."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got {pair!r}", param_hint="--param")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


@index_app.command("build")
def build(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus file (one JSON object per line), or a folder of such "
                                "files, plain or .bz2/.gz (a Wikipedia dump as released)."),
    out: Path = typer.Option(..., "--out", help="Index directory to write."),
    corpus_format: str = typer.Option("jsonl", "--corpus-format", help="jsonl | contents | scifact | fever_wiki | "
                                      "fever_wiki_titles | wiki2017 (see docs/formats.md)."),
    retriever: str = typer.Option("bm25", "--retriever", help="Retriever backend, e.g. bm25."),
    unit_sentences: int = typer.Option(3, "--unit-sentences", min=0, help="Sentences per retrieval unit; 0 = whole documents."),
    skip_bad_rows: bool = typer.Option(False, "--skip-bad-rows", help="Skip and count malformed corpus rows instead of stopping."),
    model: str | None = typer.Option(None, "--model", help="Encoder model for retrievers that take one (passed as model=...)."),
    param: list[str] = typer.Option([], "--param", help="Backend parameter key=value (repeatable), e.g. --param k1=1.2."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an index already in --out."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress (with an ETA) on stderr."),
    resume: bool = typer.Option(False, "--resume", help="Keep what an interrupted build of the same corpus into --out "
                                "finished (the passages, BM25's tokenised chunks, dense embeddings) and go on from there; "
                                "a failed build run with --resume leaves its work in place."),
) -> None:
    """Read a corpus, cut it into retrieval units and build an index directory."""
    from factrl.corpus import CorpusFormatError
    from factrl.registry import RegistryError
    from factrl.retrieval.index import build_index

    params = parse_params(param)
    if model is not None:
        params["model"] = model
    t0 = time.perf_counter()
    try:
        index = build_index(
            corpus,
            out,
            corpus_format=corpus_format,
            retriever=retriever,
            unit_sentences=unit_sentences,
            on_error="skip" if skip_bad_rows else "raise",
            overwrite=overwrite,
            progress=progress,
            resume=resume,
            **params,
        )
    except CorpusFormatError as exc:
        _fail(f"{exc} (use --skip-bad-rows to skip such rows)")
    except (RegistryError, FileNotFoundError, FileExistsError, ValueError, TypeError, ImportError) as exc:
        _fail(str(exc))
    m = index.manifest
    typer.echo(
        f"Built {m.retriever} index {out}: {m.corpus.n_documents} documents → {m.corpus.n_passages} passages "
        f"(unit_sentences={m.corpus.unit_sentences}, skipped rows={m.corpus.skipped_rows}, "
        f"empty documents={m.corpus.empty_documents}) in {time.perf_counter() - t0:.1f}s"
    )
    typer.echo(f"fingerprint {index.fingerprint}")


@index_app.command("info")
def info(directory: Path = typer.Argument(..., help="Index directory.")) -> None:
    """Print an index's manifest (JSON)."""
    from factrl.retrieval.base import IndexMismatchError
    from factrl.retrieval.index import read_manifest

    try:
        manifest = read_manifest(directory)
    except IndexMismatchError as exc:
        _fail(str(exc))
    typer.echo(json.dumps(manifest.model_dump(mode="json"), indent=2, ensure_ascii=False))
