"""Helpers for the dataset loader tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factrl.datasets import DatasetFormatError, load_dataset

FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets"


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def write_json(path: Path, rows: list[object]) -> Path:
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return path


def assert_bad_row(name: str, path: Path, line: int, reason: str, *, good: int = 0) -> None:
    """Loading ``path`` raises naming ``path:line`` and ``reason``; with skip, the row is
    counted and the ``good`` other rows load."""
    with pytest.raises(DatasetFormatError) as info:
        load_dataset(name, path, "test")
    assert f"{path}:{line}:" in str(info.value) and reason in str(info.value), str(info.value)
    skipped = load_dataset(name, path, "test", on_error="skip")
    assert len(skipped.claims) == good and [e.line for e in skipped.errors] == [line]
    assert reason in skipped.errors[0].reason
