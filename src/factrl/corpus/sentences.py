"""A small, predictable, regex-based sentence splitter.

Retrieval units and evidence ids are built from sentences, so the split must be
deterministic and easy to explain; it is not a linguistic parser.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences", "ABBREVIATIONS"]

# Tokens ending in "." after which a sentence never ends (compared case-sensitively, so a
# sentence ending in the word "no." still splits while "No. 5" does not).
ABBREVIATIONS: frozenset[str] = frozenset(
    {
        "Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "St.", "Jr.", "Sr.",
        "e.g.", "i.e.", "etc.", "vs.", "cf.", "U.S.", "U.K.",
        "No.", "Nos.", "Fig.", "Figs.", "Eq.", "Ref.", "al.",
    }
)

_CLOSERS = "\"'”’)]}"
_OPENERS = "\"'“‘"

# A boundary candidate: terminal punctuation, optional closing quotes/brackets, whitespace,
# and the next character (looked ahead, not consumed; checked in code so that any Unicode
# uppercase letter counts).
_BOUNDARY = re.compile(rf"(?P<end>[.!?])(?P<close>[{re.escape(_CLOSERS)}]*)(?P<space>\s+)(?=(?P<next>\S))")
# The whitespace-delimited token that ends at the candidate boundary, with any leading
# opening brackets/quotes removed ("(e.g." → "e.g.").
_LAST_TOKEN = re.compile(r"(\S+)$")


def _is_abbreviation(text_before: str) -> bool:
    m = _LAST_TOKEN.search(text_before)
    if m is None:
        return False
    token = m.group(1).lstrip("([{\"'“‘")
    return token in ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences.

    The rule: a sentence ends after ``.``, ``!`` or ``?`` — optionally followed by closing
    quotes or brackets (``" ' ” ’ ) ] }``) — when what follows is whitespace and then an
    uppercase letter, a digit or an opening quote (``" ' “ ‘``). Exceptions:

    * no split after the abbreviations in :data:`ABBREVIATIONS` (``Mr.``, ``Dr.``,
      ``e.g.``, ``i.e.``, ``etc.``, ``vs.``, ``U.S.``, ``No.``, ``Fig.``, ``et al.``, ...),
      matched case-sensitively on the token that carries the period;
    * decimals (``3.14``), ellipses inside words and version numbers never split because
      a boundary needs whitespace right after the punctuation.

    Returned sentences are stripped; empty ones are dropped; internal whitespace is kept.
    Text with no boundary comes back as a single sentence (or ``[]`` if blank).
    """
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        nxt = m.group("next")
        if not (nxt.isupper() or nxt.isdigit() or nxt in _OPENERS):
            continue
        if m.group("end") == "." and not m.group("close") and _is_abbreviation(text[start : m.start("end") + 1]):
            continue
        piece = text[start : m.start("space")].strip()
        if piece:
            sentences.append(piece)
        start = m.end("space")
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences
