"""Data filtering (Veri-R1 App. E): keep only claims a given model solves fully in the
offline setting (evidence given), ~70% of claims survived with GPT-4o in the paper."""

from __future__ import annotations

import json
from pathlib import Path

from factrl.train.sft import is_fully_correct
from factrl.types import Claim, Trajectory

__all__ = ["kept_claims", "write_claims_jsonl"]


def kept_claims(claims: list[Claim], trajs: list[Trajectory]) -> list[Claim]:
    """Claims (in input order) whose trajectory is fully correct."""
    ok = {t.claim_id for t in trajs if is_fully_correct(t)}
    return [c for c in claims if c.id in ok]


def write_claims_jsonl(claims: list[Claim], path: Path) -> None:
    """Write claims in factrl's generic JSONL claim format (readable with --dataset jsonl)."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for c in claims:
            row = {
                "id": c.id,
                "claim": c.text,
                "label": c.label.value if c.label else None,
                "evidence": [e.id for e in c.evidence],
                "evidence_text": {e.id: e.text for e in c.evidence if e.text},
                "dataset": c.dataset or "jsonl",
                "meta": c.meta,
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
