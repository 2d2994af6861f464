"""verl's parquet layout for factrl claims, and a reader for files in that layout
(including the Veri-R1 authors' released training files).

One row per claim, with the columns the Veri-R1 authors' files have:

    id, question      the claim id and text
    golden_answers    {evidence: [ids], label} (a copy of the ground truth)
    data_source       dataset name; verl groups validation metrics by it
    prompt            chat messages [{content, role}]: exactly what the factrl environment's
                      ``reset`` returns, so verl and factrl's own trainer see one prompt
    ability           a free-text task tag
    reward_model      {ground_truth: {evidence: [ids], label}, style: "rule"}
    extra_info        {index, split, claim_id, mode, claim, context}

Labels use the paper's spelling (SUPPORT / REFUTE / NOT ENOUGH INFO). ``extra_info.claim``
holds the whole :class:`~factrl.types.Claim` as JSON, so the agent loop rebuilds the
environment exactly and :func:`read_verl_parquet` gives the claim back unchanged;
``extra_info.context`` (offline only) holds the extra sentences the offline prompt shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from factrl.envs.spec import EnvSpec
from factrl.labels import UnknownLabelError, normalise_label
from factrl.types import Claim, EvidenceRef

__all__ = [
    "VERL_COLUMNS",
    "VerlDataError",
    "VerlExport",
    "claim_from_row",
    "context_from_row",
    "export_verl_parquet",
    "read_verl_parquet",
    "verl_rows",
]

Mode = Literal["online", "offline"]
ContextProvider = Callable[[Claim], Sequence[EvidenceRef]]

# Column order of the Veri-R1 authors' files (their optional ``metadata`` column, human
# annotators' browsing logs, has no factrl counterpart and is not written).
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
_READ_COLUMNS = VERL_COLUMNS
_VERIFY_MARK = "Verify the claim:\n"


class VerlDataError(ValueError):
    """A row that cannot become a claim (names the file, the row and the reason)."""


@dataclass
class VerlExport:
    """What :func:`export_verl_parquet` wrote: the file, its row count, and the claims
    skipped (``(claim_id, reason)``) when ``skip_invalid`` was asked for."""

    path: Path
    rows: int
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _schema() -> Any:
    import pyarrow as pa

    truth = pa.struct([("evidence", pa.list_(pa.string())), ("label", pa.string())])
    return pa.schema(
        [
            ("id", pa.string()),
            ("question", pa.string()),
            ("golden_answers", truth),
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("ground_truth", truth), ("style", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("index", pa.int64()),
                        ("split", pa.string()),
                        ("claim_id", pa.string()),
                        ("mode", pa.string()),
                        ("claim", pa.string()),
                        ("context", pa.string()),
                        ("env", pa.string()),
                        ("env_params", pa.string()),
                    ]
                ),
            ),
        ]
    )


def verl_rows(
    claims: Iterable[Claim],
    *,
    env: EnvSpec | str = "veri_r1",
    mode: Mode | None = None,
    split: str,
    data_source: str | None = None,
    context: ContextProvider | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    ability: str = "fact_verification",
    skip_invalid: bool = False,
    skipped: list[tuple[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The rows :func:`export_verl_parquet` writes, as plain dicts.

    ``env`` names the environment whose prompts are written (built with
    :func:`factrl.envs.build`); ``env_kwargs`` (and ``mode``, Veri-R1's shorthand) add to
    its parameters, which must match the agent loop's since they shape the prompt; both
    are recorded in ``extra_info`` (``env``, ``env_params``). ``context`` gives offline
    prompts the sentences around the gold evidence and is stored per row. ``ability`` is
    used for claims whose ``meta`` has none (claims read from the authors' files carry
    theirs). A claim without a gold label, or one the environment cannot start on (e.g.
    offline without evidence text), raises :class:`VerlDataError` unless
    ``skip_invalid`` is set; skipped claims are appended to ``skipped``.
    """
    from factrl.envs import EnvDeps, build

    spec = EnvSpec(name=env) if isinstance(env, str) else env
    params = {**spec.params, **dict(env_kwargs or {}), **({"mode": mode} if mode is not None else {})}
    spec = EnvSpec(name=spec.name, params=params)
    the_env = build(spec, EnvDeps.offline_only(context))
    rows: list[dict[str, Any]] = []
    for claim in claims:
        try:
            if claim.label is None:
                raise VerlDataError(f"claim {claim.id!r} has no gold label; verl training needs one")
            try:
                messages = the_env.reset(claim)
            except ValueError as exc:
                raise VerlDataError(f"claim {claim.id!r}: {exc}") from None
        except VerlDataError as exc:
            if not skip_invalid:
                raise
            if skipped is not None:
                skipped.append((claim.id, str(exc)))
            continue
        truth = {"evidence": list(claim.evidence_ids), "label": claim.label.value}
        extra_context = None
        if context is not None:
            extra_context = json.dumps([r.model_dump(mode="json") for r in context(claim)], ensure_ascii=False)
        rows.append(
            {
                "id": claim.id,
                "question": claim.text,
                "golden_answers": dict(truth),
                "data_source": data_source or claim.dataset or "factrl",
                "prompt": [{"content": m.content, "role": m.role} for m in messages],
                "ability": str(claim.meta.get("ability", ability)),
                "reward_model": {"ground_truth": truth, "style": "rule"},
                "extra_info": {
                    "index": len(rows),
                    "split": split,
                    "claim_id": claim.id,
                    # the column the Veri-R1 authors' loaders read (None for other agents)
                    "mode": getattr(getattr(the_env, "config", None), "mode", None),
                    "claim": claim.model_dump_json(),
                    "context": extra_context,
                    "env": spec.name,
                    "env_params": json.dumps(spec.params),
                },
            }
        )
    return rows


def export_verl_parquet(
    claims: Iterable[Claim],
    out_path: Path | str,
    *,
    env: EnvSpec | str = "veri_r1",
    mode: Mode | None = None,
    split: str,
    data_source: str | None = None,
    context: ContextProvider | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    ability: str = "fact_verification",
    agent_name: str | None = None,
    skip_invalid: bool = False,
) -> VerlExport:
    """Write ``claims`` as a verl training/validation parquet (see the module docstring).

    ``data_source`` defaults to each claim's ``dataset``. ``context`` (offline only) adds
    the sentences around the gold evidence to the prompt, as ``factrl eval --mode
    offline`` does. ``agent_name`` adds verl's per-row ``agent_name`` column, which picks
    the agent loop for each row (otherwise verl's ``agent.default_agent_loop`` applies).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    skipped: list[tuple[str, str]] = []
    rows = verl_rows(
        claims,
        env=env,
        mode=mode,
        split=split,
        data_source=data_source,
        context=context,
        env_kwargs=env_kwargs,
        ability=ability,
        skip_invalid=skip_invalid,
        skipped=skipped,
    )
    if not rows:
        raise VerlDataError(f"nothing to write to {out_path}: no claim could be exported")
    schema = _schema()
    if agent_name is not None:
        schema = schema.append(pa.field("agent_name", pa.string()))
        for r in rows:
            r["agent_name"] = agent_name
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    tmp.replace(out)  # a half-written file never carries the final name
    return VerlExport(path=out, rows=len(rows), skipped=skipped)


def _as_list(value: Any) -> list[Any]:
    """verl hands nested lists back as numpy arrays; parquet readers give lists."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        raise TypeError(f"expected a list, got a string {value[:40]!r}")
    return list(value)


def _claim_text_from_prompt(prompt: Any) -> str | None:
    """The claim in a Veri-R1 prompt: the text after the last 'Verify the claim:' line,
    up to the offline evidence block if there is one."""
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


def claim_from_row(row: Mapping[str, Any], *, where: str = "row") -> Claim:
    """Rebuild the claim of one verl row: from ``extra_info.claim`` when factrl wrote the
    file, otherwise from the authors' columns (``id``, ``question`` or the prompt, and
    ``reward_model.ground_truth``). Raises :class:`VerlDataError` naming ``where``."""
    extra = row.get("extra_info") or {}
    if not isinstance(extra, Mapping):
        raise VerlDataError(f"{where}: extra_info is a {type(extra).__name__}, not a mapping")
    if extra.get("claim"):
        try:
            return Claim.model_validate_json(extra["claim"])
        except ValidationError as exc:
            raise VerlDataError(f"{where}: extra_info.claim is not a claim record ({exc.errors()[0]['msg']})") from None
    reward_model = row.get("reward_model")
    truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
    if not isinstance(truth, Mapping):
        raise VerlDataError(f"{where}: no reward_model.ground_truth mapping")
    try:
        label = normalise_label(truth.get("label"))
        evidence = [EvidenceRef(id=str(e)) for e in _as_list(truth.get("evidence"))]
    except (UnknownLabelError, TypeError) as exc:
        raise VerlDataError(f"{where}: bad ground truth: {exc}") from None
    prompt = row.get("prompt") if row.get("prompt") is not None else row.get("raw_prompt")  # verl renames it
    text = row.get("question") or _claim_text_from_prompt(prompt)
    if not text or not str(text).strip():
        raise VerlDataError(f"{where}: no claim text (no 'question' column and no 'Verify the claim:' in the prompt)")
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


def read_verl_parquet(path: Path | str, *, dedupe: bool = False) -> list[Claim]:
    """Claims from a verl parquet written by factrl or by the Veri-R1 authors.

    Rows come back in file order. The authors' training file repeats some claims (same
    id, text and gold); ``dedupe=True`` keeps only the first row of each id.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"verl parquet not found: {path}")
    names = pq.read_schema(path).names
    if not {"reward_model", "extra_info"} & set(names):
        raise VerlDataError(f"{path}: not a verl file (no reward_model or extra_info column; columns: {names})")
    table = pq.read_table(path, columns=[c for c in _READ_COLUMNS if c in names])
    claims: list[Claim] = []
    seen: set[str] = set()
    for i, row in enumerate(table.to_pylist()):
        claim = claim_from_row(row, where=f"{path} row {i}")
        if dedupe:
            if claim.id in seen:
                continue
            seen.add(claim.id)
        claims.append(claim)
    return claims
