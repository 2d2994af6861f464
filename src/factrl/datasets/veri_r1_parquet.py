"""Veri-R1's released data (Veri-R1 authors' ``train_online``/``test_online``/``test_offline``
files) and factrl's own verl exports: parquet in verl's layout, one row per claim.

This is a reader of a foreign format. The columns the authors' files have:

    id, question      the claim id and text
    golden_answers    {evidence: [ids], label} (a copy of the ground truth)
    data_source       dataset name (exfever, feverous, ...)
    prompt            chat messages [{content, role}] as rendered for their model
    ability           a free-text task tag
    reward_model      {ground_truth: {evidence: [ids], label}, style: "rule"}
    extra_info        {index, split}; factrl's exports add {claim_id, mode, claim, context}
    metadata          (authors only) annotators' browsing logs; not read

A claim comes from ``extra_info.claim`` (the whole :class:`~factrl.types.Claim` as JSON)
when factrl wrote the file, otherwise from ``id``, ``question`` and
``reward_model.ground_truth``. Rows that lack ``question`` (verl hands rows to its agent
loop with the prompt renamed ``raw_prompt``) fall back to the claim line of the rendered
Veri-R1 prompt. The authors' training file repeats claims (same id, text and gold, another
``extra_info.index``); the loader keeps the first row of each and counts the repeats.

``load_dataset("veri_r1_parquet", "/data/veri_r1", "test_online")`` reads
``/data/veri_r1/test_online.parquet``; ``source`` may also be the parquet file itself.
Rows are numbered from 0, as pyarrow and pandas number them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow
from factrl.datasets.base import DATASETS, LoadResult, RowCollector
from factrl.labels import Label, UnknownLabelError, normalise_label
from factrl.types import Claim, EvidenceRef

__all__ = [
    "VERL_COLUMNS",
    "VeriR1ParquetLoader",
    "VerlDataError",
    "claim_from_row",
    "context_from_row",
    "read_verl_parquet",
]

# Column order of the Veri-R1 authors' files (their optional ``metadata`` column has no
# factrl counterpart and is neither read nor written).
VERL_COLUMNS = (
    "id",
    "question",
    "golden_answers",
    "data_source",
    "prompt",
    "ability",
    "reward_model",
    "extra_info",
)
_VERIFY_MARK = "Verify the claim:\n"


class VerlDataError(ValueError):
    """A row that cannot become a claim (names the file, the row and the reason)."""


def _as_list(value: Any) -> list[Any]:
    """verl hands nested lists back as numpy arrays; parquet readers give lists."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        raise TypeError(f"expected a list, got a string {value[:40]!r}")
    return list(value)


def _claim_text_from_prompt(prompt: Any) -> str | None:
    """The claim in a rendered Veri-R1 prompt: the text after the last 'Verify the claim:'
    line, up to the offline evidence block if there is one. Only for rows without a
    ``question`` column."""
    messages = _as_list(prompt)
    if not messages:
        return None
    content = str(messages[-1].get("content", ""))
    at = content.rfind(_VERIFY_MARK)
    if at == -1:
        return None
    rest = content[at + len(_VERIFY_MARK) :]
    rest = re.split(r"\n\s*<information>", rest, maxsplit=1)[0]
    return rest.strip() or None


def _parse(row: Mapping[str, Any]) -> Claim:
    """One row → a claim; raises :class:`BadRow` with the reason."""
    extra = row.get("extra_info") or {}
    if not isinstance(extra, Mapping):
        raise BadRow(f"extra_info is a {type(extra).__name__}, not a mapping")
    if extra.get("claim"):
        try:
            return Claim.model_validate_json(extra["claim"])
        except ValidationError as exc:
            raise BadRow(f"extra_info.claim is not a claim record ({exc.errors()[0]['msg']})") from None
    reward_model = row.get("reward_model")
    truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
    if not isinstance(truth, Mapping):
        raise BadRow("no reward_model.ground_truth mapping")
    try:
        label = normalise_label(truth.get("label"))
        evidence = [EvidenceRef(id=str(e)) for e in _as_list(truth.get("evidence"))]
    except (UnknownLabelError, TypeError) as exc:
        raise BadRow(f"bad ground truth: {exc}") from None
    prompt = row.get("prompt") if row.get("prompt") is not None else row.get("raw_prompt")  # verl renames it
    text = row.get("question") or _claim_text_from_prompt(prompt)
    if not text or not str(text).strip():
        raise BadRow("no claim text (no 'question' column and no 'Verify the claim:' in the prompt)")
    data_source = row.get("data_source")
    index = extra.get("index")
    claim_id = row.get("id") or extra.get("claim_id") or f"{data_source or 'verl'}-{index}"
    meta = {k: v for k, v in (("ability", row.get("ability")), ("split", extra.get("split")), ("index", index)) if v is not None}
    return Claim(
        id=str(claim_id),
        text=str(text).strip(),
        label=label,
        evidence=evidence,
        dataset=str(data_source) if data_source else None,
        meta=meta,
    )


def claim_from_row(row: Mapping[str, Any], *, where: str = "row") -> Claim:
    """Rebuild the claim of one verl row (see the module docstring). Raises
    :class:`VerlDataError` naming ``where``."""
    try:
        return _parse(row)
    except BadRow as exc:
        raise VerlDataError(f"{where}: {exc}") from None


def context_from_row(row: Mapping[str, Any], *, where: str = "row") -> list[EvidenceRef] | None:
    """The offline context sentences factrl stored in ``extra_info.context`` (or None)."""
    extra = row.get("extra_info") or {}
    raw = extra.get("context") if isinstance(extra, Mapping) else None
    if not raw:
        return None
    try:
        return [EvidenceRef.model_validate(r) for r in json.loads(raw)]
    except (ValueError, TypeError, ValidationError) as exc:
        raise VerlDataError(f"{where}: extra_info.context is not a list of evidence records ({exc})") from None


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a verl parquet, in file order (only the columns a claim needs)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow comes with the train extra
        raise ImportError("reading parquet needs pyarrow: pip install 'factrl[train]' (or pyarrow)") from None

    if not path.is_file():
        raise FileNotFoundError(f"verl parquet not found: {path}")
    names = pq.read_schema(path).names
    if not {"reward_model", "extra_info"} & set(names):
        raise VerlDataError(f"{path}: not a verl file (no reward_model or extra_info column; columns: {names})")
    table = pq.read_table(path, columns=[c for c in VERL_COLUMNS if c in names])
    for batch in table.to_batches():
        yield from batch.to_pylist()


def _same_claim(a: Claim, b: Claim) -> bool:
    """Repeats in the authors' files differ only in ``meta`` (their row index)."""
    return (a.text, a.label, a.evidence_ids, a.dataset) == (b.text, b.label, b.evidence_ids, b.dataset)


@DATASETS.register("veri_r1_parquet")
class VeriR1ParquetLoader:
    """``source`` is a ``.parquet`` file, or a folder holding ``<split>.parquet``.

    With ``dedupe`` (the default) a row repeating an earlier claim (same id, text, label
    and evidence) is dropped and counted in ``LoadResult.duplicates``; a repeated id with
    a different claim is a bad row either way.
    """

    name = "veri_r1_parquet"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI)

    def __init__(self, *, dedupe: bool = True) -> None:
        self.dedupe = dedupe

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        source = Path(source)
        path = source / f"{split}.parquet" if source.is_dir() else source
        if not path.is_file():
            have = sorted(p.stem for p in source.glob("*.parquet")) if source.is_dir() else []
            raise FileNotFoundError(f"Veri-R1 parquet for split {split!r} not found: {path} "
                                    f"(splits there: {', '.join(have) or 'none'})")
        out = RowCollector(on_error, limit)
        first: dict[str, Claim] = {}
        for i, row in enumerate(_rows(path)):
            if out.full:
                break
            try:
                claim = _parse(row)
                earlier = first.get(claim.id)
                if earlier is not None and not _same_claim(earlier, claim):
                    raise BadRow(f"claim id {claim.id!r} repeats with a different claim (text, label or evidence)")
            except BadRow as exc:
                out.bad(path, i, str(exc))
                continue
            if earlier is not None and self.dedupe:
                out.result.duplicates += 1
                continue
            first.setdefault(claim.id, claim)
            out.add(claim)
        return out.result


def read_verl_parquet(path: Path | str, *, dedupe: bool = False) -> list[Claim]:
    """Claims from a verl parquet written by factrl or by the Veri-R1 authors, in file order.

    Every row is returned unless ``dedupe=True``, which keeps only the first row of each
    id. A bad row raises :class:`VerlDataError` naming the file and row. For datasets
    (skip bad rows, limit, repeats counted) use ``load_dataset("veri_r1_parquet", ...)``.
    """
    path = Path(path)
    claims: list[Claim] = []
    seen: set[str] = set()
    for i, row in enumerate(_rows(path)):
        claim = claim_from_row(row, where=f"{path} row {i}")
        if dedupe:
            if claim.id in seen:
                continue
            seen.add(claim.id)
        claims.append(claim)
    return claims
