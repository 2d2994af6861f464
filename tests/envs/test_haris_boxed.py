"""HARIS's \\boxed{} reader: the same contents as the regex it replaces, in linear time."""

from __future__ import annotations

import random

from _support import best_seconds, linear_budget
from factrl.protocol.haris import _BOXED, boxed_contents, parse_boxed
from factrl.labels import Label


def test_reads_what_the_regex_reads():
    rnd = random.Random(0)
    alpha = ["\\boxed{", "\\text{", "}", "{", " ", "  ", "Support", "Refute", "x", "Not Supported", "\n", "a" * 45, "\\"]
    for _ in range(20000):
        text = "".join(rnd.choice(alpha) for _ in range(rnd.randint(0, 14)))
        assert boxed_contents(text) == [w.strip() for w in _BOXED.findall(text)], text


def test_labels():
    assert parse_boxed("so \\boxed{Support}") == (Label.SUPPORT, [])
    assert parse_boxed("\\boxed{ \\text{ Refuted } }")[0] is Label.REFUTE
    assert parse_boxed("\\boxed{Support} then \\boxed{Refute}")[0] is Label.REFUTE  # the last one


def test_hostile_text_is_linear():
    # was cubic: "\\boxed{" and 1,000 spaces took ~39 s
    # Relative to a plain text of the same size (the machine's load cancels out).
    for text in ("\\boxed{" + " " * 100_000, "\\boxed{" * 15_000, ("\\boxed{" + " " * 50 + "x") * 1_500):
        plain = ("a" * 9 + " ") * (len(text) // 10)
        assert best_seconds(boxed_contents, text) < linear_budget(boxed_contents, plain)
