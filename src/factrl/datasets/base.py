"""The dataset seam: a loader turns one on-disk format into :class:`~factrl.types.Claim`
records, reporting malformed rows by file, line and reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from factrl.corpus.errors import OnError, RowError, RowFormatError
from factrl.registry import Registry
from factrl.labels import Label
from factrl.types import Claim

__all__ = ["DATASETS", "DatasetFormatError", "DatasetLoader", "LoadResult", "RowError", "load_dataset"]


class DatasetFormatError(RowFormatError):
    """A dataset row is malformed; the message reads ``file:line: reason``."""


@dataclass
class LoadResult:
    """The claims that loaded, the rows that were skipped (``on_error="skip"``), and how
    many rows only repeated a claim already loaded (formats whose files repeat claims)."""

    claims: list[Claim] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    duplicates: int = 0

    def __len__(self) -> int:
        return len(self.claims)


@runtime_checkable
class DatasetLoader(Protocol):
    """Loads one split of a dataset from ``source`` (a file or folder, per format).
    ``labels`` lists the labels the dataset uses (for balanced sampling and reports)."""

    name: str
    labels: tuple[Label, ...]

    def load(
        self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None
    ) -> LoadResult: ...


# Entries are loader classes taking no arguments; ``DATASETS.get(name)().load(...)``.
DATASETS: Registry[type[DatasetLoader]] = Registry("dataset")
DATASETS.register_lazy("scifact", "factrl.datasets.scifact")
DATASETS.register_lazy("jsonl", "factrl.datasets.jsonl")
DATASETS.register_lazy("veri_r1_parquet", "factrl.datasets.veri_r1_parquet")
for _name in ("fever", "feverous", "feverous_s", "hover", "exfever", "averitec", "climate_fever", "checkwhy", "haris", "news_graded",
              "rar_prompts", "factworld"):
    DATASETS.register_lazy(_name, f"factrl.datasets.{_name}")


def load_dataset(
    name: str, source: Path | str, split: str, *, on_error: OnError = "raise", limit: int | None = None
) -> LoadResult:
    """Load ``split`` of the dataset format registered as ``name`` from ``source``."""
    loader = DATASETS.get(name)()
    return loader.load(Path(source), split, on_error=on_error, limit=limit)


class RowCollector:
    """Shared bookkeeping for loaders: raise or record a bad row; stop at ``limit``."""

    def __init__(self, on_error: OnError, limit: int | None) -> None:
        from factrl.corpus.errors import check_on_error

        check_on_error(on_error)
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self.on_error = on_error
        self.limit = limit
        self.result = LoadResult()

    @property
    def full(self) -> bool:
        return self.limit is not None and len(self.result.claims) >= self.limit

    def add(self, claim: Claim) -> None:
        self.result.claims.append(claim)

    def bad(self, file: Path | str, line: int, reason: str) -> None:
        if self.on_error == "raise":
            raise DatasetFormatError(file, line, reason)
        self.result.errors.append(RowError(str(file), line, reason))


def collect_claims(
    path: Path,
    parse: Callable[[dict[str, Any]], Claim],
    on_error: OnError,
    limit: int | None,
    *,
    rows: Iterable[tuple[int, Any]] | None = None,
) -> LoadResult:
    """The row loop every claim loader shares: parse each object with ``parse`` (which
    raises ``BadRow`` on bad input), refuse duplicate ids, and raise or record bad rows
    with file and line, stopping at ``limit`` claims. ``rows`` are ``(line, value)`` pairs
    (default: the JSON lines of ``path``; see ``factrl.datasets._records`` for arrays and
    CSV), a value being a ``RowError`` where the row could not be read."""
    from factrl.corpus import iter_json_lines
    from factrl.datasets._fields import BadRow

    out = RowCollector(on_error, limit)
    seen: set[str] = set()
    for line_no, value in iter_json_lines(path) if rows is None else rows:
        if out.full:
            break
        if isinstance(value, RowError):
            out.bad(path, line_no, value.reason)
            continue
        try:
            if not isinstance(value, dict):
                raise BadRow(f"expected a JSON object, got {type(value).__name__}")
            claim = parse(value)
            if claim.id in seen:
                raise BadRow(f"duplicate claim id {claim.id!r}")
        except BadRow as exc:
            out.bad(path, line_no, str(exc))
            continue
        seen.add(claim.id)
        out.add(claim)
    return out.result
