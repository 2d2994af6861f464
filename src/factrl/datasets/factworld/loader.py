"""The ``factworld`` dataset: a generated directory's claims, one split per file.

``source`` is the directory ``factrl data factworld`` wrote (``claims/<split>.jsonl``
inside) or one claims file. Rows are factrl's ``jsonl`` claim format; each claim must
carry ``meta["num_hops"]`` and ``meta["questions"]`` (AVeriTeC-style, so the ProFact
reward and the AVeriTeC metrics read them as they read AVeriTeC's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.datasets.jsonl import parse_row as parse_jsonl_row
from factrl.labels import Label
from factrl.types import Claim

__all__ = ["FactWorldLoader"]


def _parse(row: dict[str, Any]) -> Claim:
    claim = parse_jsonl_row(row)
    if claim.label not in (Label.SUPPORT, Label.REFUTE, Label.NEI):
        raise BadRow(f"a factworld claim is SUPPORT, REFUTE or NOT ENOUGH INFO, not {claim.label}")
    hops = claim.meta.get("num_hops")
    if isinstance(hops, bool) or not isinstance(hops, int) or hops < 1:
        raise BadRow("meta.num_hops must be an integer >= 1")
    questions = claim.meta.get("questions")
    if not isinstance(questions, list) or len(questions) != hops or not all(
            isinstance(q, dict) and isinstance(q.get("question"), str) and isinstance(q.get("answers"), list)
            for q in questions):
        raise BadRow("meta.questions must list one {question, answers} object per hop")
    claim.dataset = "factworld"
    return claim


@DATASETS.register("factworld")
class FactWorldLoader:
    """``source``: a generated directory (reads ``claims/<split>.jsonl``) or a claims file."""

    name = "factworld"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        source = Path(source)
        path = source / "claims" / f"{split}.jsonl" if source.is_dir() else source
        if not path.is_file():
            hint = " (a factworld directory has claims/train.jsonl, dev.jsonl and test.jsonl)" if source.is_dir() else ""
            raise FileNotFoundError(f"factworld claims not found: {path}{hint}")
        return collect_claims(path, _parse, on_error, limit)
