"""A run's data: load the dataset, keep usable claims, split off the held-out part, and
record the split in the run directory.

The split is written once, as ``train_ids.txt`` and ``held_out_ids.txt`` (one claim id a
line), and read back whenever those files are present: a resumed run, the held-out
evaluation after training and a re-run all see exactly the claims of the first call, even
if the split settings changed since. Delete the files (or use a new run directory) to
split again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from factrl.types import Claim

__all__ = ["HELD_OUT_IDS", "TRAIN_IDS", "DataSettings", "SplitMismatchError", "prepare_splits"]

TRAIN_IDS = "train_ids.txt"
HELD_OUT_IDS = "held_out_ids.txt"


@dataclass
class DataSettings:
    """The ``[data]`` table of a run config."""

    dataset: str = "scifact"  # a DATASETS registry name
    data_dir: str = "../shared/data/scifact"
    split: str = "train"
    held_out_fraction: float = 0.2  # evaluated before/after, never trained on
    split_seed: int = 0
    limit: int | None = None  # cap on training claims (after the held-out split)
    held_out_limit: int | None = None  # cap on held-out claims evaluated (evenly spaced, label shares kept)
    skip_bad_rows: bool = False


def _evenly_spaced(claims: list[Claim], cap: int | None, name: str) -> list[Claim]:
    """At most ``cap`` claims, evenly spaced through the label-grouped list (shares kept)."""
    if cap is None:
        return claims
    if cap < 1:
        raise ValueError(f"{name} must be >= 1, got {cap}")
    n = len(claims)
    return claims if cap >= n else [claims[i * n // cap] for i in range(cap)]


class SplitMismatchError(ValueError):
    """The split recorded in a run directory names claims the dataset no longer has."""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _usable_claims(data: DataSettings) -> list[Claim]:
    """The dataset's labelled, non-empty claims, in file order."""
    from factrl.datasets.base import DATASETS

    loader = DATASETS.get(data.dataset)()
    loaded = loader.load(Path(data.data_dir), data.split, on_error="skip" if data.skip_bad_rows else "raise")
    # Prompt sets (Binary RAR) have no labels: a loader says so with ``labelled = False``.
    needs_label = getattr(loader, "labelled", True)
    usable = [c for c in loaded.claims if (c.label is not None or not needs_label) and c.text.strip()]
    dropped = len(loaded.claims) - len(usable)
    if loaded.errors or dropped:
        _say(f"data: skipped {len(loaded.errors)} malformed rows, {dropped} unlabelled/empty claims")
    if loaded.duplicates:
        _say(f"data: dropped {loaded.duplicates} rows repeating an earlier claim")
    return usable


def _read_ids(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]


def _write_ids(path: Path, claims: list[Claim]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"{c.id}\n" for c in claims), encoding="utf-8")
    tmp.replace(path)  # a half-written file never carries the final name


def _recorded(data: DataSettings, by_id: dict[str, Claim], out_dir: Path) -> tuple[list[Claim], list[Claim]]:
    parts = []
    for name in (TRAIN_IDS, HELD_OUT_IDS):
        ids = _read_ids(out_dir / name)
        missing = [i for i in ids if i not in by_id]
        if missing:
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            raise SplitMismatchError(
                f"{out_dir / name} names {len(missing)} claim id(s) that {data.dataset!r} split {data.split!r} "
                f"at {data.data_dir} does not have (or has without a label/text): {shown}. The run directory was "
                "split from other data; use a new output directory, or delete the id files to split again"
            )
        parts.append([by_id[i] for i in ids])
    train, held_out = parts
    if not train:
        raise ValueError(f"{out_dir / TRAIN_IDS} names no claims")
    _say(f"data: reusing the split recorded in {out_dir} ({len(train)} train, {len(held_out)} held out)")
    return train, held_out


def prepare_splits(data: DataSettings, out_dir: Path) -> tuple[list[Claim], list[Claim]]:
    """``(train, held_out)`` for a run in ``out_dir``.

    The first call loads ``data.dataset``, keeps labelled non-empty claims, splits off
    ``held_out_fraction`` (stratified by label, seeded with ``split_seed``), caps the
    training part at ``limit`` and the held-out part at ``held_out_limit`` (evenly spaced
    through the label-grouped held-out part, so label shares are kept; the claims left out
    are trained on neither) and writes both id lists. Later calls read those lists back
    and return the same claims in the same order; the files are never rewritten. Raises
    :class:`SplitMismatchError` when the recorded ids are not all in the dataset.
    """
    from factrl.datasets.sampling import split_claims

    out_dir = Path(out_dir)
    usable = _usable_claims(data)
    by_id: dict[str, Claim] = {}
    for c in usable:
        if by_id.setdefault(c.id, c) is not c:
            raise ValueError(f"claim id {c.id!r} appears twice in {data.dataset!r} split {data.split!r}; "
                             "a split recorded by id needs unique ids")
    have = [(out_dir / name).is_file() for name in (TRAIN_IDS, HELD_OUT_IDS)]
    if all(have):
        return _recorded(data, by_id, out_dir)
    if any(have):
        present, absent = (TRAIN_IDS, HELD_OUT_IDS) if have[0] else (HELD_OUT_IDS, TRAIN_IDS)
        raise FileNotFoundError(f"{out_dir} has {present} but not {absent}; restore it, or delete "
                                f"{present} to split again")
    train, held_out = split_claims(usable, test_fraction=data.held_out_fraction, seed=data.split_seed)
    train = _evenly_spaced(train, data.limit, "limit")
    held_out = _evenly_spaced(held_out, data.held_out_limit, "held_out_limit")
    if not train:
        raise ValueError("no training claims left after the held-out split and filters")
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_ids(out_dir / HELD_OUT_IDS, held_out)
    _write_ids(out_dir / TRAIN_IDS, train)
    return train, held_out
