"""Writing factrl claims in verl's parquet layout (the layout of the Veri-R1 authors'
released files). Reading such files, the authors' included, is the ``veri_r1_parquet``
dataset format (:mod:`factrl.datasets.veri_r1_parquet`); its names are re-exported here.

One row per claim, with the columns the Veri-R1 authors' files have:

    id, question      the claim id and text
    golden_answers    {evidence: [ids], label} (a copy of the ground truth)
    data_source       dataset name; verl groups validation metrics by it
    prompt            chat messages [{content, role}]: exactly what the factrl environment's
                      ``reset`` returns, so verl and factrl's own trainer see one prompt
    ability           a free-text task tag
    reward_model      {ground_truth: {evidence: [ids], label}, style: "rule"}
    extra_info        {index, split, claim_id, mode, claim, context, env, env_params}

Labels use the paper's spelling (SUPPORT / REFUTE / NOT ENOUGH INFO). ``extra_info.claim``
holds the whole :class:`~factrl.types.Claim` as JSON, so the agent loop rebuilds the
environment exactly and ``read_verl_parquet`` gives the claim back unchanged;
``extra_info.context`` (offline only) holds the extra sentences the offline prompt shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# The reading side lives with the dataset formats; re-exported for existing imports.
from factrl.datasets.veri_r1_parquet import (
    VERL_COLUMNS,
    VerlDataError,
    claim_from_row,
    context_from_row,
    read_verl_parquet,
)
from factrl.envs.base import DEFAULT_AGENT
from factrl.envs.spec import EnvSpec
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
    env: EnvSpec | str = DEFAULT_AGENT,
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
    :func:`factrl.components.resolve_agent`: an alias such as ``veri_r1_offline`` is
    recorded under its one registry name with the parameters it fixes); ``env_kwargs``
    add to its parameters, which must match the agent loop's since they shape the prompt;
    both are recorded in ``extra_info`` (``env``, ``env_params``). ``mode`` is a deprecated
    alias of ``env_kwargs={"mode": ...}`` (one warning; an explicit ``mode`` parameter
    wins). ``context`` gives offline prompts the sentences around the gold evidence and is
    stored per row. ``ability`` is
    used for claims whose ``meta`` has none (claims read from the authors' files carry
    theirs). A claim without a gold label, or one the environment cannot start on (e.g.
    offline without evidence text), raises :class:`VerlDataError` unless
    ``skip_invalid`` is set; skipped claims are appended to ``skipped``.
    """
    from factrl.components import mode_alias, resolve_agent
    from factrl.envs import EnvDeps, build

    spec = EnvSpec(name=env) if isinstance(env, str) else env
    params = mode_alias({**spec.params, **dict(env_kwargs or {})}, mode, where="the verl exporter")
    spec = resolve_agent(EnvSpec(name=spec.name, params=params))
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
    env: EnvSpec | str = DEFAULT_AGENT,
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
    the sentences around the gold evidence to the prompt, as ``factrl eval --param
    mode=offline`` does. ``mode`` is deprecated: pass ``env_kwargs={"mode": ...}``.
    ``agent_name`` adds verl's per-row ``agent_name`` column, which picks the agent loop
    for each row (otherwise verl's ``agent.default_agent_loop`` applies).
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
