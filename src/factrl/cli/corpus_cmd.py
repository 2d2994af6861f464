"""``factrl corpus pool``: a closed corpus from the gold evidence of a dataset's claims."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli.app import corpus_app


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


@corpus_app.command("pool")
def pool(
    dataset: str = typer.Option(..., "--dataset", help="Dataset format, e.g. climate_fever, averitec, feverous_s, haris."),
    data_dir: Path = typer.Option(..., "--data-dir", help="Dataset file or folder."),
    split: str = typer.Option("dev", "--split", help="Split to pool (picks the file inside a folder)."),
    out: Path = typer.Option(..., "--out", help="Corpus file to write (jsonl, for factrl index build --corpus)."),
    skip_bad_rows: bool = typer.Option(False, "--skip-bad-rows", help="Skip and count malformed dataset rows."),
    allow_conflicts: bool = typer.Option(
        False, "--allow-conflicts", help="Keep the first text of an evidence id given two texts, and count it, instead of stopping."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --out if it exists."),
) -> None:
    """Pool the gold evidence text of every claim of a split into factrl's jsonl corpus
    format, one document per evidence unit or source article, with the dataset's own
    evidence ids as sentence ids (see docs/formats.md)."""
    from factrl.cli._common import select_claims
    from factrl.datasets.pool import PoolError, pool_evidence, write_pooled_corpus

    if out.exists() and not overwrite:
        _fail(f"{out} exists; pass --overwrite to replace it")
    selection = select_claims(dataset, data_dir, split, skip_bad_rows=skip_bad_rows)
    try:
        docs, report = pool_evidence(selection.claims, on_conflict="count" if allow_conflicts else "raise")
    except PoolError as exc:
        hint = "" if "no evidence text" in str(exc) else " (use --allow-conflicts to keep the first text and count)"
        _fail(f"{dataset} {data_dir}: {exc}{hint}")
    for message in report.conflicts[:5]:
        typer.echo(f"conflict: {message}", err=True)
    if report.missing_text:
        typer.echo(f"warning: {report.missing_text} evidence references had no text and are not in the corpus", err=True)
    write_pooled_corpus(docs, out)
    typer.echo(
        f"Pooled {report.units} evidence units from {report.claims} claims into {report.documents} documents → {out} "
        f"(repeated={report.repeated}, conflicts={len(report.conflicts)}, without text={report.missing_text}, "
        f"skipped rows={selection.skipped_rows})"
    )
