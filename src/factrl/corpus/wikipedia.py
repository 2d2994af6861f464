"""Readers for the papers' Wikipedia dumps, with the evidence ids their claims cite.

* ``fever_wiki`` — FEVER's ``wiki-pages/wiki-NNN.jsonl`` (the June 2017 dump, ~5.4M
  pages; FEVEROUS and Veri-R1 use the same pages): ``{"id", "text", "lines"}`` where
  ``lines`` is ``"0\\tsentence\\tlink…\\n1\\tsentence…"``. Sentence ``N`` of page ``P`` is
  ``P_sentence_N`` with the page id as released (``Soul_Food_-LRB-film-RRB-``), the ids
  of factrl's ``fever`` dataset loader. Line numbers are kept as released: an empty line
  makes no sentence but the next one keeps its number.
* ``fever_wiki_titles`` — the same dump with ids by the page's title
  (``Soul Food (film)_sentence_0``): the ``Title_sentence_N`` ids of the Veri-R1 authors'
  data (FEVEROUS, EX-FEVER).
* ``wiki2017`` — HotpotQA's 2017 introduction paragraphs
  (``enwiki-20171001-pages-meta-current-withlinks-abstracts/AA/wiki_00.bz2`` …, ~5.2M
  pages; HoVer, EX-FEVER and HARIS retrieve from them): ``{"id", "url", "title", "text":
  [sentences], …}``. Sentence ``i`` of the list is ``<title>_sentence_<i>`` as HoVer's
  ``supporting_facts`` ``[title, i]`` cite it; blank sentences keep their number.

In both dumps the title is the document title; FEVER's bracket tokens (``-LRB-`` …) are
turned back into brackets in titles and sentence text (its ids keep them).
"""

from __future__ import annotations

import re
from typing import Any

from factrl.corpus.document import Document, sentence_id
from factrl.corpus.readers import CORPUS_FORMATS, BlankRow, _BadRow, _field, _id_field, _reader

__all__ = ["fever_title", "fever_text"]

_FEVER_TOKENS = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
                 "-COLON-": ":"}
_FEVER_TOKEN = re.compile("|".join(re.escape(t) for t in _FEVER_TOKENS))


def fever_title(page_id: str) -> str:
    """A FEVER page id as a title: ``Soul_Food_-LRB-film-RRB-`` → ``Soul Food (film)``."""
    return _FEVER_TOKEN.sub(lambda m: _FEVER_TOKENS[m.group(0)], page_id).replace("_", " ")


def fever_text(sentence: str) -> str:
    """FEVER's tokenised sentence with its bracket tokens as brackets (spacing kept)."""
    if "-" not in sentence and "`" not in sentence and "''" not in sentence:
        return sentence
    text = _FEVER_TOKEN.sub(lambda m: _FEVER_TOKENS[m.group(0)], sentence)
    return text.replace("``", '"').replace("''", '"')


def _fever_lines(lines: Any) -> tuple[list[str], list[int]]:
    if not isinstance(lines, str):
        raise _BadRow(f"field 'lines' must be a string, got {type(lines).__name__}")
    sentences: list[str] = []
    numbers: list[int] = []
    seen: set[int] = set()
    for n, line in enumerate(lines.split("\n")):
        if not line.strip():
            continue
        num, _, rest = line.partition("\t")
        if not num.isdigit():
            raise _BadRow(f"field 'lines' line {n} does not start with a sentence number and a tab: {line[:40]!r}")
        number = int(num)
        if number in seen:
            raise _BadRow(f"field 'lines' numbers sentence {number} twice")
        seen.add(number)
        text = fever_text(rest.split("\t", 1)[0].strip())
        if text:
            sentences.append(text)
            numbers.append(number)
    return sentences, numbers


def _fever(row: dict[str, Any], *, by_title: bool) -> Document:
    page = row.get("id")
    if page == "" and not row.get("text") and not row.get("lines"):
        raise BlankRow  # the dump's first row: no page at all
    page = _id_field(row, "id")
    sentences, numbers = _fever_lines(_field(row, "lines"))
    title = fever_title(page)
    prefix = title if by_title else page
    return Document(id=prefix, title=title, sentences=sentences,
                    sentence_ids=[sentence_id(prefix, i) for i in numbers])


def _parse_fever_wiki(row: dict[str, Any]) -> Document:
    """FEVER wiki-pages; ids by page id as released."""
    return _fever(row, by_title=False)


def _parse_fever_wiki_titles(row: dict[str, Any]) -> Document:
    """FEVER wiki-pages; ids by page title."""
    return _fever(row, by_title=True)


def _parse_wiki2017(row: dict[str, Any]) -> Document:
    """HotpotQA's 2017 introduction paragraphs; ids by title and sentence position."""
    title = _field(row, "title")
    if not isinstance(title, str) or not title.strip():
        raise _BadRow("field 'title' must be a non-empty string")
    title = title.strip()
    text = _field(row, "text")
    if not isinstance(text, list):
        raise _BadRow(f"field 'text' must be a list of sentences, got {type(text).__name__}")
    sentences: list[str] = []
    ids: list[str] = []
    for i, sent in enumerate(text):
        if isinstance(sent, list):
            raise _BadRow("field 'text' holds paragraphs (lists of sentences): this is the full-article dump; "
                          "wiki2017 reads the introduction paragraphs (…-withlinks-abstracts)")
        if not isinstance(sent, str):
            raise _BadRow(f"field 'text' item {i} must be a string, got {type(sent).__name__}")
        if sent.strip():
            sentences.append(sent.strip())
            ids.append(sentence_id(title, i))
    return Document(id=title, title=title, sentences=sentences, sentence_ids=ids)


CORPUS_FORMATS.register("fever_wiki")(_reader(_parse_fever_wiki))
CORPUS_FORMATS.register("fever_wiki_titles")(_reader(_parse_fever_wiki_titles))
CORPUS_FORMATS.register("wiki2017")(_reader(_parse_wiki2017))
