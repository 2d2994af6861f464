"""Index directories: build one from a corpus file, load it back, search it.

Layout of an index directory::

    manifest.json          what was built: retriever, its params, corpus checksum, chunking
    passages.jsonl         the retrieval units, one Passage per line, in index order
    passages.offsets.npy   where each line starts; lookup/ maps ids to rows
    passages.json          the passage store's summary (counts, corpus checksum)
    <retriever>/           the backend's own files (e.g. bm25/ with bm25s arrays)

``build_index`` streams: documents are read, cut and written one at a time (the passage
pass, :mod:`factrl.retrieval.passage_pass`, into the passage store,
:mod:`factrl.retrieval.store`), then the backend builds over the store, which it
reads in chunks. Memory does not grow with the corpus beyond what a backend keeps (BM25:
its vocabulary). Progress, with an ETA, goes to stderr. With ``resume=True`` a build
that was interrupted keeps what it finished: a complete passage store of the same
corpus and chunking, and the chunks a backend saved (BM25's tokenised chunks, dense
embeddings).

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

from factrl.corpus import CORPUS_FORMATS, OnError
from factrl.corpus.files import corpus_sha256
from factrl.registry import RegistryError
from factrl.retrieval.base import RETRIEVERS, IndexMismatchError, RetrieverBackend
from factrl.retrieval.passage_pass import STORE_SUMMARY, reusable_store, store_key, write_store
from factrl.retrieval.store import PASSAGES, PassageStore
from factrl.types import Hit, Passage

__all__ = [
    "FORMAT_VERSION",
    "STORE_SUMMARY",
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
    blank_rows: int = 0


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


def _say(progress: bool, msg: str) -> None:
    if progress:
        print(f"[factrl index] {msg}", file=sys.stderr, flush=True)


class Index:
    """A loaded index directory; ``search`` delegates to the backend. ``passages`` is a
    sequence in index order — the memory-mapped :class:`~factrl.retrieval.store.PassageStore`
    of a loaded directory, or any list of passages."""

    def __init__(self, directory: Path, manifest: IndexManifest, passages: Sequence[Passage], backend: RetrieverBackend) -> None:
        self.directory = Path(directory)
        self.manifest = manifest
        self.passages: Sequence[Passage] = passages
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
        if isinstance(self.passages, PassageStore):
            found = self.passages.get(passage_id)
        else:
            if self._by_id is None:
                self._by_id = {p.id: p for p in self.passages}
            found = self._by_id.get(passage_id)
        if found is None:
            raise UnknownPassageError(f"no passage {passage_id!r} in index {self.directory}")
        return found

    def sentence_text(self, sentence_id: str) -> str | None:
        """The text of an evidence sentence id (e.g. ``doc_id=12_sentence_3``), or None."""
        if isinstance(self.passages, PassageStore):
            return self.passages.sentence_text(sentence_id)
        if self._sentences is None:
            self._sentences = {sid: s for p in self.passages for sid, s in zip(p.sentence_ids, p.sentences)}
        return self._sentences.get(sentence_id)

    def document(self, doc_id: str) -> list[Passage]:
        """The passages of document ``doc_id``, in order (empty when it has none)."""
        if isinstance(self.passages, PassageStore):
            return self.passages.document(doc_id)
        return [p for p in self.passages if p.doc_id == doc_id]

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
    resume: bool,
    backend_params: dict[str, Any],
) -> tuple[PassageStore, Any, dict[str, Any], str]:
    """The passage store, then the backend over it (everything but the manifest)."""
    def say(msg: str) -> None:
        _say(progress, msg)

    say(f"hashing {corpus}")
    digest = corpus_sha256(corpus)
    key = store_key(digest, corpus_format, unit_sentences, on_error)
    summary = reusable_store(out_dir, key) if resume else None
    if summary is not None:
        say(f"resuming: the passage store is complete ({summary['n_passages']} passages)")
    else:
        summary = write_store(corpus, out_dir, corpus_format, unit_sentences, on_error, key, say)
    store = PassageStore(out_dir, expect=summary["n_passages"])

    t1 = time.perf_counter()
    say(f"building {retriever} over {len(store)} passages")
    accepted = inspect.signature(backend_cls.build).parameters
    knobs = {"progress": progress, "say": say,  # runtime knobs, not recorded
             "resume_key": f"{digest}|{corpus_format}|{unit_sentences}|{on_error}" if resume else None}
    backend_params = {**backend_params, **{k: v for k, v in knobs.items() if k in accepted}}
    backend = backend_cls.build(store, out_dir / retriever, **backend_params)
    say(f"built {retriever} in {time.perf_counter() - t1:.1f}s")
    return store, backend, summary, digest


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
    resume: bool = False,
    **backend_params: Any,
) -> Index:
    """Read ``corpus`` (a file or a folder of files), cut it into units, build
    ``retriever`` over them in ``out_dir``.

    ``backend_params`` go to the backend's ``build`` (e.g. ``k1=1.2`` for BM25, ``model=``
    for dense). Refuses to overwrite an existing index unless ``overwrite=True``. A build
    that fails removes the folder it created, unless ``resume=True``: then what it
    finished stays, and the same call again continues from there.
    """
    from factrl import __version__

    corpus, out_dir = Path(corpus), Path(out_dir)
    backend_cls = RETRIEVERS.get(retriever)  # fail fast on unknown names
    CORPUS_FORMATS.get(corpus_format)
    if not corpus.exists():
        raise FileNotFoundError(f"corpus file not found: {corpus}")
    if (out_dir / MANIFEST).exists():
        if not overwrite:
            raise FileExistsError(f"{out_dir} already holds an index; pass overwrite=True (--overwrite) to replace it")
        (out_dir / MANIFEST).unlink()
    if overwrite:
        (out_dir / STORE_SUMMARY).unlink(missing_ok=True)
        if (out_dir / retriever).is_dir():
            shutil.rmtree(out_dir / retriever)
    fresh = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        store, backend, summary, digest = _build_parts(
            corpus, out_dir, corpus_format, retriever, backend_cls, unit_sentences, on_error, progress, resume,
            backend_params,
        )
    except BaseException:
        if fresh and not resume:  # leave nothing half-built behind in a folder we created
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
            n_documents=summary["n_documents"],
            n_passages=summary["n_passages"],
            unit_sentences=unit_sentences,
            skipped_rows=summary["skipped_rows"],
            empty_documents=summary["empty_documents"],
            blank_rows=summary.get("blank_rows", 0),
        ),
        factrl_version=__version__,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    tmp = out_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    tmp.replace(out_dir / MANIFEST)
    return Index(out_dir, manifest, store, backend)


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


def load_index(directory: Path | str, *, expect: dict[str, Any] | None = None,
               options: dict[str, Any] | None = None) -> Index:
    """Open an index directory built by :func:`build_index`.

    ``expect`` names what the caller relies on — ``retriever``, ``corpus_sha256``,
    ``unit_sentences``, or any backend param such as ``model`` or ``k1`` — and a
    disagreement raises :class:`IndexMismatchError` saying what differs, as does a missing
    or unknown-version manifest or a missing file. ``options`` are the backend's runtime
    knobs for loading (BM25: ``kernel``, ``n_threads``, ``mmap``); one the backend does
    not take is a ``ValueError``.

    Passages stay on disk (memory-mapped) and are parsed when a search returns them.
    """
    directory = Path(directory)
    manifest = read_manifest(directory)
    if expect:
        _check_expect(directory, manifest, expect)
    backend_dir = directory / manifest.retriever
    store = PassageStore(directory, expect=manifest.corpus.n_passages)
    if not backend_dir.exists():
        raise IndexMismatchError(f"index {directory} is incomplete: {backend_dir.name} is missing")
    try:
        backend_cls = RETRIEVERS.get(manifest.retriever)
    except RegistryError as exc:
        raise IndexMismatchError(f"index {directory} was built with retriever {manifest.retriever!r}: {exc}") from None
    options = dict(options or {})
    if options:
        accepted = inspect.signature(backend_cls.load).parameters
        unknown = sorted(k for k in options if k not in accepted)
        if unknown:
            raise ValueError(f"retriever {manifest.retriever!r} takes no load option(s) {', '.join(unknown)}")
    backend = backend_cls.load(store, backend_dir, manifest.params, **options)
    return Index(directory, manifest, store, backend)
