"""Invented names built from syllables: unique, one token per name part, never changed by
the English Snowball stemmer BM25 uses.

A name part is two or three syllables. Inner syllables are onset + vowel (+ coda); the
last is onset + ``a``/``o``/``u`` + a final from :data:`_FINALS`. No part ends in ``e``,
``i``, ``y``, ``s``, ``l`` or a stemmable suffix (``-er``, ``-ic``, ``-al``, ``-ion``,
``-ing``, ...), so the stem of every part is the part itself and two different parts never
share a stem: a search for a name finds that name's documents.
"""

from __future__ import annotations

import random

__all__ = ["NameMaker"]

_ONSETS = ("b", "d", "f", "g", "k", "m", "n", "p", "r", "t", "v", "z", "br", "dr", "gr", "kr", "tr", "vr",
           "sk", "th", "zh", "kh", "dv", "tv")
_VOWELS = ("a", "o", "u", "e", "i")
_CODAS = ("", "", "r", "l", "n", "m", "k", "s")
_LAST_VOWELS = ("a", "o", "u")
_FINALS = ("", "k", "th", "x", "rd", "m", "n", "nd", "sk", "v")


class NameMaker:
    """Draws name parts from ``rng``, never the same part twice (case-insensitive)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def _syllables(self, n: int) -> list[str]:
        r = self.rng
        inner = [r.choice(_ONSETS) + r.choice(_VOWELS) + r.choice(_CODAS) for _ in range(n - 1)]
        return [*inner, r.choice(_ONSETS) + r.choice(_LAST_VOWELS) + r.choice(_FINALS)]

    def _claim(self, word: str) -> bool:
        key = word.lower()
        if key in self.used or len(key) < 4:
            return False
        self.used.add(key)
        return True

    def part(self, syllables: int | None = None) -> str:
        """A new capitalised name part of ``syllables`` (default 2 or 3) syllables."""
        for _ in range(10_000):
            n = syllables or self.rng.choice((2, 2, 3))
            word = "".join(self._syllables(n)).capitalize()
            if self._claim(word):
                return word
        raise RuntimeError("ran out of names; lower the number of entities")

    def variant(self, word: str) -> str:
        """A new part that differs from ``word`` in one vowel of its first syllable
        ("Korvath" → "Karvath"): a look-alike, but another token."""
        letters = list(word)
        vowels = [i for i, ch in enumerate(letters) if ch.lower() in "aeiou"]
        for i in vowels[:1]:  # the first syllable's: the last keeps its stemmer-proof shape
            others = [v for v in _VOWELS if v != letters[i].lower()]
            self.rng.shuffle(others)
            for v in others:
                cand = "".join(letters[:i] + [v] + letters[i + 1:])
                if self._claim(cand):
                    return cand.capitalize()
        return self.part()
