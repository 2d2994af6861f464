"""The passage pass of an index build: read a corpus, cut each document into retrieval
units and write them to the passage store (:mod:`factrl.retrieval.store`) one document at
a time, with progress and an ETA; and the check that lets ``build_index(resume=True)``
keep a finished store of the same corpus and chunking (its summary, ``passages.json``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factrl.corpus import OnError, ReadReport, UnitReport, make_units, read_corpus
from factrl.corpus.files import corpus_bytes
from factrl.retrieval.base import IndexMismatchError
from factrl.retrieval.store import PassageStore, PassageWriter

__all__ = ["STORE_SUMMARY", "reusable_store", "store_key", "write_store"]

STORE_SUMMARY = "passages.json"


class _Progress:
    """Progress of the passage pass: documents and passages so far, share of the corpus's
    bytes read, rate and ETA, at most every ``every`` seconds."""

    def __init__(self, say: Callable[[str], None], total_bytes: int, every: float = 10.0) -> None:
        self.say, self.total, self.every = say, max(total_bytes, 1), every
        self.t0 = self.last = time.perf_counter()

    def tick(self, report: ReadReport, passages: int, *, final: bool = False) -> None:
        now = time.perf_counter()
        if not final and now - self.last < self.every:
            return
        self.last = now
        frac = min(report.bytes_read / self.total, 1.0)
        elapsed = now - self.t0
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        self.say(f"passages: {report.documents:,} documents → {passages:,} passages, {frac:.1%} of "
                 f"{self.total / 1e6:,.0f} MB read, {report.documents / max(elapsed, 1e-9):,.0f} documents/s, "
                 f"{'done' if final else 'ETA ' + _fmt_eta(eta)}")


def _fmt_eta(seconds: float) -> str:
    if seconds != seconds:  # nan: nothing read yet
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def store_key(digest: str, corpus_format: str, unit_sentences: int, on_error: str) -> dict[str, Any]:
    return {"corpus_sha256": digest, "format": corpus_format, "unit_sentences": unit_sentences, "on_error": on_error}


def reusable_store(out_dir: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The summary of a finished passage store of the same corpus and chunking, or None."""
    try:
        summary = json.loads((out_dir / STORE_SUMMARY).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(summary, dict) or summary.get("key") != key:
        return None
    try:
        PassageStore(out_dir, expect=summary.get("n_passages")).close()
    except IndexMismatchError:
        return None
    return summary


def write_store(corpus: Path, out_dir: Path, corpus_format: str, unit_sentences: int, on_error: OnError,
                 key: dict[str, Any], say: Callable[[str], None]) -> dict[str, Any]:
    """Read, cut and write the passages one document at a time; returns the summary."""
    t0 = time.perf_counter()
    (out_dir / STORE_SUMMARY).unlink(missing_ok=True)
    say(f"reading {corpus} ({corpus_format})")
    read_report, unit_report = ReadReport(), UnitReport()
    progress = _Progress(say, corpus_bytes(corpus))
    writer = PassageWriter(out_dir)
    try:
        for doc in read_corpus(corpus, corpus_format, on_error=on_error, report=read_report):
            for p in make_units([doc], unit_sentences, report=unit_report):
                writer.add(p)
            progress.tick(read_report, len(writer))
    except BaseException:
        writer.abort()
        raise
    n = writer.close()
    progress.tick(read_report, n, final=True)
    for err in read_report.skipped[:10]:
        say(f"skipped {err}")
    say(
        f"{read_report.documents} documents → {n} passages "
        f"({read_report.n_skipped} bad rows skipped, {unit_report.empty_documents} empty documents) "
        f"in {time.perf_counter() - t0:.1f}s"
    )
    if not n:
        raise ValueError(f"{corpus}: no passages to index (no document had any sentence)")
    summary = {"key": key, "n_documents": read_report.documents, "n_passages": n,
               "skipped_rows": read_report.n_skipped, "empty_documents": unit_report.empty_documents,
               "blank_rows": read_report.blank_rows}
    tmp = out_dir / (STORE_SUMMARY + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out_dir / STORE_SUMMARY)
    return summary
