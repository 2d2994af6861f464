"""Helpers shared by commands: loading claims with clear errors, offline context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer


@dataclass(frozen=True)
class ClaimSelection:
    """The claims a command will use, and how many malformed rows ``--skip-bad-rows``
    skipped on the way (runs record it: a skipped row is a claim not evaluated)."""

    claims: list[Any]
    skipped_rows: int


def load_claims(
    dataset: str,
    data_dir: Path,
    split: str,
    *,
    skip_bad_rows: bool = False,
    balanced: bool = False,
    limit: int | None = None,
    ids: Path | None = None,
) -> list[Any]:
    """The claims of :func:`select_claims`."""
    return select_claims(dataset, data_dir, split, skip_bad_rows=skip_bad_rows, balanced=balanced,
                         limit=limit, ids=ids).claims


def select_claims(
    dataset: str,
    data_dir: Path,
    split: str,
    *,
    skip_bad_rows: bool = False,
    balanced: bool = False,
    limit: int | None = None,
    ids: Path | None = None,
) -> ClaimSelection:
    """Claims of a dataset split: malformed rows stop the command with file:line and
    reason (or are skipped and counted), optional id list, label interleaving, limit."""
    from factrl.datasets import DatasetFormatError, load_dataset
    from factrl.datasets.sampling import interleave_labels
    from factrl.registry import RegistryError

    try:
        loaded = load_dataset(dataset, data_dir, split, on_error="skip" if skip_bad_rows else "raise",
                              limit=None if (balanced or ids) else limit)
    except (DatasetFormatError, RegistryError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for err in loaded.errors[:5]:
        typer.echo(f"skipped: {err}", err=True)
    if loaded.errors:
        typer.echo(f"skipped {len(loaded.errors)} malformed rows", err=True)
    claims = loaded.claims
    if ids is not None:
        wanted = set(ids.read_text().split())
        claims = [c for c in claims if c.id in wanted]
    if balanced:
        claims = interleave_labels(claims)
    return ClaimSelection(claims if limit is None else claims[:limit], len(loaded.errors))


def require_claims(selection: ClaimSelection, data_dir: Path, split: str) -> None:
    """Stop with a clear error when nothing is left to run on."""
    if not selection.claims:
        skipped = f"; {selection.skipped_rows} malformed rows skipped" if selection.skipped_rows else ""
        typer.echo(f"error: no claims in {data_dir} (split {split!r}) after filters and --limit{skipped}",
                   err=True)
        raise typer.Exit(1)


def offline_context(index: Any, max_sentences: int | None = 16) -> Callable[[Any], list[Any]] | None:
    """The offline setting's context provider (cited documents' sentences) for an index."""
    if index is None:
        return None
    from factrl.envs.context import document_context

    return document_context(index.passages, max_sentences=max_sentences)


CONTEXT_SENTENCES_HELP = ("Offline prompts: at most this many sentences of the cited documents "
                          "(the gold evidence is always added); the CPU presets use 6.")
