"""Index directories: build one from a corpus file, load it back, search it.

Layout of an index directory::

    manifest.json      what was built: retriever, its params, corpus checksum, chunking
    passages.jsonl     the retrieval units, one Passage per line, in index order
    <retriever>/       the backend's own files (e.g. bm25/ with bm25s arrays)

``build_index`` and ``load_index`` are generic over backends: any class registered in
``factrl.retrieval.base.RETRIEVERS`` that follows ``RetrieverBackend`` plugs in.
The manifest is written last, so a directory with a manifest is a complete index.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import shutil
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from factrl.corpus import CORPUS_FORMATS, OnError, ReadReport, UnitReport, make_units, read_corpus
from factrl.registry import RegistryError
from factrl.retrieval.base import RETRIEVERS, IndexMismatchError, RetrieverBackend
from factrl.types import Hit, Passage

__all__ = [
    "FORMAT_VERSION",
    "CorpusInfo",
    "Index",
    "IndexManifest",
    "UnknownPassageError",
    "build_index",
    "corpus_sha256",
    "load_index",
    "read_manifest",
]

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PASSAGES = "passages.jsonl"


class CorpusInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    path: str
    sha256: str
    format: str
    n_documents: int
    n_passages: int
    unit_sentences: int
    skipped_rows: int = 0
    empty_documents: int = 0


class IndexManifest(BaseModel):
    """The contents of ``manifest.json``."""

    model_config = ConfigDict(extra="allow")

    format_version: int
    retriever: str
    params: dict[str, Any]
    corpus: CorpusInfo
    factrl_version: str
    created: str


class UnknownPassageError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def corpus_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _say(progress: bool, msg: str) -> None:
    if progress:
        print(f"[factrl index] {msg}", file=sys.stderr, flush=True)


class Index:
    """A loaded index directory; ``search`` delegates to the backend."""

    def __init__(self, directory: Path, manifest: IndexManifest, passages: Sequence[Passage], backend: RetrieverBackend) -> None:
        self.directory = Path(directory)
        self.manifest = manifest
        self.passages: list[Passage] = list(passages)
        self.backend = backend
        self._by_id: dict[str, Passage] | None = None
        self._sentences: dict[str, str] | None = None

    def __len__(self) -> int:
        return len(self.passages)

    def __repr__(self) -> str:
        return f"Index({str(self.directory)!r}, retriever={self.manifest.retriever!r}, passages={len(self)})"

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` hits per query, best first (fewer when little matches)."""
        return self.backend.search(queries, k)

    def passage(self, passage_id: str) -> Passage:
        if self._by_id is None:
            self._by_id = {p.id: p for p in self.passages}
        try:
            return self._by_id[passage_id]
        except KeyError:
            raise UnknownPassageError(f"no passage {passage_id!r} in index {self.directory}") from None

    def sentence_text(self, sentence_id: str) -> str | None:
        """The text of an evidence sentence id (e.g. ``doc_id=12_sentence_3``), or None."""
        if self._sentences is None:
            self._sentences = {sid: s for p in self.passages for sid, s in zip(p.sentence_ids, p.sentences)}
        return self._sentences.get(sentence_id)

    @property
    def fingerprint(self) -> str:
        """Stable across rebuilds of the same corpus with the same settings (ignores the
        build time and the corpus path); changes when anything affecting results does."""
        m = self.manifest
        key = {
            "format_version": m.format_version,
            "retriever": m.retriever,
            "params": m.params,
            "corpus_sha256": m.corpus.sha256,
            "corpus_format": m.corpus.format,
            "unit_sentences": m.corpus.unit_sentences,
            "n_passages": m.corpus.n_passages,
        }
        blob = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
        return f"{m.retriever}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def _build_parts(
    corpus: Path,
    out_dir: Path,
    corpus_format: str,
    retriever: str,
    backend_cls: Any,
    unit_sentences: int,
    on_error: OnError,
    progress: bool,
    backend_params: dict[str, Any],
) -> tuple[list[Passage], Any, ReadReport, UnitReport, str]:
    """Read, cut, write passages.jsonl and build the backend (everything but the manifest)."""
    t0 = time.perf_counter()
    _say(progress, f"hashing {corpus}")
    digest = corpus_sha256(corpus)
    _say(progress, f"reading {corpus} ({corpus_format})")
    read_report, unit_report = ReadReport(), UnitReport()
    docs = read_corpus(corpus, corpus_format, on_error=on_error, report=read_report)
    passages = make_units(docs, unit_sentences, report=unit_report)
    for err in read_report.skipped[:10]:
        _say(progress, f"skipped {err}")
    _say(
        progress,
        f"{read_report.documents} documents → {len(passages)} passages "
        f"({read_report.n_skipped} bad rows skipped, {unit_report.empty_documents} empty documents) "
        f"in {time.perf_counter() - t0:.1f}s",
    )
    if not passages:
        raise ValueError(f"{corpus}: no passages to index (no document had any sentence)")
    with (out_dir / PASSAGES).open("w", encoding="utf-8") as fh:
        for p in passages:
            fh.write(p.model_dump_json() + "\n")

    t1 = time.perf_counter()
    _say(progress, f"building {retriever} over {len(passages)} passages")
    if "progress" in inspect.signature(backend_cls.build).parameters:  # a runtime knob, not recorded
        backend_params = {**backend_params, "progress": progress}
    backend = backend_cls.build(passages, out_dir / retriever, **backend_params)
    _say(progress, f"built {retriever} in {time.perf_counter() - t1:.1f}s")

    return passages, backend, read_report, unit_report, digest


def build_index(
    corpus: Path | str,
    out_dir: Path | str,
    *,
    corpus_format: str = "jsonl",
    retriever: str = "bm25",
    unit_sentences: int = 3,
    on_error: OnError = "raise",
    overwrite: bool = False,
    progress: bool = True,
    **backend_params: Any,
) -> Index:
    """Read ``corpus``, cut it into units, build ``retriever`` over them in ``out_dir``.

    ``backend_params`` go to the backend's ``build`` (e.g. ``k1=1.2`` for BM25, ``model=``
    for dense). Refuses to overwrite an existing index unless ``overwrite=True``.
    """
    from factrl import __version__

    corpus, out_dir = Path(corpus), Path(out_dir)
    backend_cls = RETRIEVERS.get(retriever)  # fail fast on unknown names
    CORPUS_FORMATS.get(corpus_format)
    if not corpus.is_file():
        raise FileNotFoundError(f"corpus file not found: {corpus}")
    if (out_dir / MANIFEST).exists():
        if not overwrite:
            raise FileExistsError(f"{out_dir} already holds an index; pass overwrite=True (--overwrite) to replace it")
        (out_dir / MANIFEST).unlink()
    if overwrite and (out_dir / retriever).is_dir():
        shutil.rmtree(out_dir / retriever)
    fresh = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        passages, backend, read_report, unit_report, digest = _build_parts(
            corpus, out_dir, corpus_format, retriever, backend_cls, unit_sentences, on_error, progress, backend_params
        )
    except BaseException:
        if fresh:  # leave nothing half-built behind in a folder we created
            shutil.rmtree(out_dir, ignore_errors=True)
        raise

    manifest = IndexManifest(
        format_version=FORMAT_VERSION,
        retriever=retriever,
        params=backend.params(),
        corpus=CorpusInfo(
            path=str(corpus.resolve()),
            sha256=digest,
            format=corpus_format,
            n_documents=read_report.documents,
            n_passages=len(passages),
            unit_sentences=unit_sentences,
            skipped_rows=read_report.n_skipped,
            empty_documents=unit_report.empty_documents,
        ),
        factrl_version=__version__,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    tmp = out_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    tmp.replace(out_dir / MANIFEST)
    return Index(out_dir, manifest, passages, backend)


def read_manifest(directory: Path | str) -> IndexManifest:
    """Read and check an index directory's manifest without loading the index."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not directory.is_dir():
        raise IndexMismatchError(f"index directory not found: {directory}")
    if not path.is_file():
        raise IndexMismatchError(f"{directory} is not a factrl index: {MANIFEST} is missing (build one with `factrl index build`)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexMismatchError(f"{path}: not valid JSON ({exc})") from None
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if version != FORMAT_VERSION:
        raise IndexMismatchError(
            f"{path}: unknown index format_version {version!r} (this factrl reads {FORMAT_VERSION}); rebuild the index"
        )
    try:
        return IndexManifest.model_validate(raw)
    except ValidationError as exc:
        raise IndexMismatchError(f"{path}: malformed manifest: {exc}") from None


def _manifest_value(m: IndexManifest, key: str) -> tuple[bool, Any]:
    """Look ``key`` up in the manifest: top-level fields, ``corpus_<field>``, then params."""
    top = {"retriever": m.retriever, "format_version": m.format_version, "unit_sentences": m.corpus.unit_sentences}
    if key in top:
        return True, top[key]
    if key.startswith("corpus_"):
        corpus = m.corpus.model_dump()
        name = key.removeprefix("corpus_")
        if name in corpus:
            return True, corpus[name]
    if key in m.params:
        return True, m.params[key]
    return False, None


def _same(a: Any, b: Any) -> bool:
    return a == b or str(a) == str(b)


def _check_expect(directory: Path, m: IndexManifest, expect: dict[str, Any]) -> None:
    problems = []
    for key, want in expect.items():
        found, have = _manifest_value(m, key)
        if not found:
            problems.append(f"{key}: expected {want!r} but the index ({m.retriever}) records no {key!r}")
        elif not _same(have, want):
            problems.append(f"{key}: expected {want!r}, index has {have!r}")
    if problems:
        raise IndexMismatchError(f"index {directory} does not match: " + "; ".join(problems))


def _read_passages(path: Path) -> list[Passage]:
    passages = []
    with path.open("r", encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                passages.append(Passage.model_validate_json(line))
            except ValidationError as exc:
                raise IndexMismatchError(f"{path}:{line_no}: not a passage record ({exc.errors()[0]['msg']})") from None
    return passages


def load_index(directory: Path | str, *, expect: dict[str, Any] | None = None) -> Index:
    """Open an index directory built by :func:`build_index`.

    ``expect`` names what the caller relies on — ``retriever``, ``corpus_sha256``,
    ``unit_sentences``, or any backend param such as ``model`` or ``k1`` — and a
    disagreement raises :class:`IndexMismatchError` saying what differs, as does a missing
    or unknown-version manifest or a missing file.
    """
    directory = Path(directory)
    manifest = read_manifest(directory)
    if expect:
        _check_expect(directory, manifest, expect)
    passages_path, backend_dir = directory / PASSAGES, directory / manifest.retriever
    for needed in (passages_path, backend_dir):
        if not needed.exists():
            raise IndexMismatchError(f"index {directory} is incomplete: {needed.name} is missing")
    passages = _read_passages(passages_path)
    if len(passages) != manifest.corpus.n_passages:
        raise IndexMismatchError(
            f"index {directory}: {PASSAGES} has {len(passages)} passages, manifest says {manifest.corpus.n_passages}"
        )
    try:
        backend_cls = RETRIEVERS.get(manifest.retriever)
    except RegistryError as exc:
        raise IndexMismatchError(f"index {directory} was built with retriever {manifest.retriever!r}: {exc}") from None
    backend = backend_cls.load(passages, backend_dir, manifest.params)
    return Index(directory, manifest, passages, backend)
