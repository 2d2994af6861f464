"""Corpus readers: each on-disk format yields :class:`Document` records lazily.

Formats (see ``docs/formats.md``):

* ``jsonl`` — ``{"id", "title"?, "text"}`` per line; text is split with
  :func:`~factrl.corpus.sentences.split_sentences`; ids ``<id>_sentence_<i>``. A row may
  instead list ``"sentences"`` (kept one for one, not split) and ``"sentence_ids"``.
* ``contents`` — Search-R1 / FlashRAG ``{"id", "contents"}`` where ``contents`` is
  ``"Title"\\ntext``; same ids as ``jsonl``.
* ``scifact`` — SciFact ``{"doc_id", "title", "abstract": [sentences], ...}``; sentences are
  kept as released so ids ``doc_id=<doc_id>_sentence_<i>`` match the gold rationales.
* ``fever_wiki``, ``fever_wiki_titles`` and ``wiki2017`` — the papers' Wikipedia dumps
  (:mod:`factrl.corpus.wikipedia`).

A corpus may be one file or a folder of files, plain or ``.bz2``/``.gz``
(:mod:`factrl.corpus.files`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from factrl.corpus.document import Document, sentence_id
from factrl.corpus.errors import OnError, RowError, RowFormatError, check_on_error, iter_json_lines
from factrl.corpus.files import corpus_files
from factrl.corpus.sentences import split_sentences
from factrl.registry import Registry

__all__ = [
    "BlankRow",
    "CORPUS_FORMATS",
    "CorpusFormatError",
    "CorpusReader",
    "ReadReport",
    "read_corpus",
]


class CorpusFormatError(RowFormatError):
    """A corpus row is malformed (bad JSON, missing or empty field, wrong type)."""


@dataclass
class ReadReport:
    """What a reader saw: rows read, documents yielded, rows skipped (with reasons), rows
    that are placeholders of nothing (``blank_rows``: FEVER's dump opens with a page that
    has no id and no text), and the stored bytes read so far (for progress)."""

    rows: int = 0
    documents: int = 0
    skipped: list[RowError] = field(default_factory=list)
    blank_rows: int = 0
    bytes_read: int = 0

    @property
    def n_skipped(self) -> int:
        return len(self.skipped)


class CorpusReader(Protocol):
    """Yield the documents of ``path`` one at a time.

    Malformed rows raise :class:`CorpusFormatError`; with ``on_error="skip"`` they are
    recorded in ``report.skipped`` instead. Blank lines are ignored.
    """

    def __call__(
        self, path: Path, *, on_error: OnError = "raise", report: ReadReport | None = None
    ) -> Iterator[Document]: ...


CORPUS_FORMATS: Registry[CorpusReader] = Registry("corpus format")


class _BadRow(Exception):
    """Raised by a row parser; the driver adds file and line."""


class BlankRow(Exception):
    """Raised by a row parser for a row that stands for nothing (counted, not an error)."""


# --- field helpers: each names the field and what was wrong ---------------------------


def _field(row: dict[str, Any], name: str) -> Any:
    if name not in row:
        raise _BadRow(f"missing field {name!r}")
    return row[name]


def _id_field(row: dict[str, Any], name: str) -> str:
    value = _field(row, name)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _BadRow(f"field {name!r} must be a string or integer, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise _BadRow(f"field {name!r} is empty")
    return text


def _text_field(row: dict[str, Any], name: str, *, required: bool = True) -> str:
    if not required and row.get(name) is None:
        return ""
    value = _field(row, name)
    if not isinstance(value, str):
        raise _BadRow(f"field {name!r} must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise _BadRow(f"field {name!r} is empty")
    return value


def _drive(
    path: Path,
    parse: Callable[[dict[str, Any]], Document],
    on_error: OnError,
    report: ReadReport | None,
) -> Iterator[Document]:
    """Shared loop: read JSON lines, parse rows, raise or skip-and-count bad ones."""
    check_on_error(on_error)
    report = report if report is not None else ReadReport()
    base = report.bytes_read

    def position(pos: int) -> None:
        report.bytes_read = base + pos

    for line_no, value in iter_json_lines(Path(path), on_position=position):
        report.rows += 1
        if isinstance(value, RowError):
            err = value
        elif not isinstance(value, dict):
            err = RowError(str(path), line_no, f"expected a JSON object, got {type(value).__name__}")
        else:
            try:
                doc = parse(value)
            except _BadRow as exc:
                err = RowError(str(path), line_no, str(exc))
            except BlankRow:
                report.blank_rows += 1
                continue
            else:
                report.documents += 1
                yield doc
                continue
        if on_error == "raise":
            raise CorpusFormatError(err.file, err.line, err.reason)
        report.skipped.append(err)


def _document(doc_id: str, title: str, sentences: list[str], prefix: str) -> Document:
    return Document(
        id=doc_id,
        title=title,
        sentences=sentences,
        sentence_ids=[sentence_id(prefix, i) for i in range(len(sentences))],
    )


def _given_sentences(row: dict[str, Any], doc_id: str, title: str) -> Document:
    """A row that lists its own ``sentences`` (and optionally ``sentence_ids``): kept one
    for one, no splitting, so ids chosen by whoever wrote the corpus survive (pooled
    evidence corpora, ``factrl corpus pool``)."""
    sentences = row["sentences"]
    if not isinstance(sentences, list) or not sentences:
        raise _BadRow("field 'sentences' must be a non-empty list of strings")
    for i, sent in enumerate(sentences):
        if not isinstance(sent, str) or not sent.strip():
            raise _BadRow(f"field 'sentences' item {i} must be a non-empty string")
    ids = row.get("sentence_ids")
    if ids is None:
        return _document(doc_id, title, [s.strip() for s in sentences], doc_id)
    if not isinstance(ids, list) or len(ids) != len(sentences):
        raise _BadRow(f"field 'sentence_ids' must be a list of {len(sentences)} ids, one per sentence")
    for i, sid in enumerate(ids):
        if not isinstance(sid, str) or not sid.strip():
            raise _BadRow(f"field 'sentence_ids' item {i} must be a non-empty string")
    if len(set(ids)) != len(ids):
        raise _BadRow("field 'sentence_ids' repeats an id")
    return Document(id=doc_id, title=title, sentences=[s.strip() for s in sentences], sentence_ids=[s.strip() for s in ids])


def _parse_jsonl(row: dict[str, Any]) -> Document:
    doc_id = _id_field(row, "id")
    title = _text_field(row, "title", required=False).strip()
    if "sentences" in row:
        return _given_sentences(row, doc_id, title)
    if "sentence_ids" in row:
        raise _BadRow("field 'sentence_ids' needs a 'sentences' list beside it")
    text = _text_field(row, "text")
    return _document(doc_id, title, split_sentences(text), doc_id)


def _parse_contents(row: dict[str, Any]) -> Document:
    doc_id = _id_field(row, "id")
    contents = _text_field(row, "contents")
    head, newline, body = contents.partition("\n")
    if newline:
        title = head.strip().strip('"').strip()
    else:  # no title line: the whole field is text
        title, body = "", contents
    return _document(doc_id, title, split_sentences(body), doc_id)


def _parse_scifact(row: dict[str, Any]) -> Document:
    doc_id = _id_field(row, "doc_id")
    title = _text_field(row, "title", required=False).strip()
    abstract = _field(row, "abstract")
    if not isinstance(abstract, list):
        raise _BadRow(f"field 'abstract' must be a list of sentences, got {type(abstract).__name__}")
    if not abstract:
        raise _BadRow("field 'abstract' is empty")
    for i, sent in enumerate(abstract):
        if not isinstance(sent, str):
            raise _BadRow(f"field 'abstract' item {i} must be a string, got {type(sent).__name__}")
    # Sentences are kept one-for-one (even fragments) so index i stays the gold index i.
    return _document(doc_id, title, [s.strip() for s in abstract], f"doc_id={doc_id}")


def _reader(parse: Callable[[dict[str, Any]], Document]) -> CorpusReader:
    def read(path: Path, *, on_error: OnError = "raise", report: ReadReport | None = None) -> Iterator[Document]:
        return _drive(Path(path), parse, on_error, report)

    read.__doc__ = parse.__doc__
    return read


CORPUS_FORMATS.register("jsonl")(_reader(_parse_jsonl))
CORPUS_FORMATS.register("contents")(_reader(_parse_contents))
CORPUS_FORMATS.register("scifact")(_reader(_parse_scifact))
CORPUS_FORMATS.register_lazy("fever_wiki", "factrl.corpus.wikipedia")
CORPUS_FORMATS.register_lazy("fever_wiki_titles", "factrl.corpus.wikipedia")
CORPUS_FORMATS.register_lazy("wiki2017", "factrl.corpus.wikipedia")


def read_corpus(
    path: Path | str,
    format: str = "jsonl",
    *,
    on_error: OnError = "raise",
    report: ReadReport | None = None,
) -> Iterator[Document]:
    """Yield the documents of ``path`` read with the reader registered as ``format``;
    ``path`` may be a folder of corpus files (read in sorted order, see
    :func:`~factrl.corpus.files.corpus_files`).

    Pass a :class:`ReadReport` to observe rows read and rows skipped (``on_error="skip"``).
    """
    reader = CORPUS_FORMATS.get(format)
    path = Path(path)
    if not path.is_dir():
        return reader(path, on_error=on_error, report=report)
    files = corpus_files(path)
    report = report if report is not None else ReadReport()
    return _chain(reader, files, on_error, report)


def _chain(reader: CorpusReader, files: list[Path], on_error: OnError, report: ReadReport) -> Iterator[Document]:
    for f in files:
        yield from reader(f, on_error=on_error, report=report)
