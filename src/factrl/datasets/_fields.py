"""Field checks shared by dataset loaders; each failure names the field and the problem."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from factrl.labels import Label, UnknownLabelError, normalise_label


class BadRow(Exception):
    """Raised while parsing one row; the loader adds file and line."""


def require(row: dict[str, Any], name: str) -> Any:
    if name not in row:
        raise BadRow(f"missing field {name!r}")
    return row[name]


def id_field(row: dict[str, Any], name: str) -> str:
    value = require(row, name)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadRow(f"field {name!r} must be a string or integer, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise BadRow(f"field {name!r} is empty")
    return text


def text_field(row: dict[str, Any], name: str) -> str:
    value = require(row, name)
    if not isinstance(value, str):
        raise BadRow(f"field {name!r} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise BadRow(f"field {name!r} is empty")
    return value.strip()


def label_value(raw: Any, where: str = "label") -> Label:
    try:
        return normalise_label(raw)
    except UnknownLabelError as exc:
        # Keep the message short: the full alias list is in labels.LABEL_ALIASES.
        raise BadRow(f"{where}: unknown label {raw!r}" if isinstance(raw, str) else f"{where}: {exc}") from None


def int_field(row: dict[str, Any], name: str, *, minimum: int = 0) -> int:
    value = require(row, name)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadRow(f"field {name!r} must be an integer >= {minimum}, got {value!r}")
    return value


def list_field(row: dict[str, Any], name: str, *, required: bool = True) -> list[Any]:
    if not required and row.get(name) is None:
        return []
    value = require(row, name)
    if not isinstance(value, list):
        raise BadRow(f"field {name!r} must be a list, got {type(value).__name__}")
    return value


def optional_label(row: dict[str, Any], name: str = "label") -> Label | None:
    """The normalised label, or None when the row has none (unlabelled test splits)."""
    raw = row.get(name)
    return None if raw is None or raw == "" else label_value(raw, f"field {name!r}")


class TextIds:
    """Stable ids for evidence a file ships as bare text: the ``k``-th distinct text of a
    group (a page, a variant), in the order first seen, is ``make(group, k)``. The same
    text in one group always gets the same id, so texts repeated across claims pool into
    one corpus unit; ids depend only on the file's row order."""

    def __init__(self, make: Callable[[str, int], str]) -> None:
        self._make = make
        self._ids: dict[tuple[str, str], str] = {}
        self._count: dict[str, int] = {}

    def get(self, group: str, text: str) -> str:
        key = (group, text)
        if key not in self._ids:
            n = self._count.get(group, 0)
            self._count[group] = n + 1
            self._ids[key] = self._make(group, n)
        return self._ids[key]
