"""The shared text helpers: the one-pass ``strip_think`` and ``code_fences`` give what the
regular expressions they replace gave (those re-scanned from every opening: quadratic on
100 kB of ``<think>`` or of one letter after a fence), and what they give on such text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from factrl.protocol.text import code_fences, numbered_items, strip_think

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"<think>.*\Z", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z]*\s*(.*?)```", re.DOTALL)

TEXT = st.lists(
    st.sampled_from(["<think>", "</think>", "<THINK>", "</Think>", "<thi", "nk>", "<", ">", "/", "```", "`", "json",
                     "py", " ", "\n", "\t", "a", "{", "}", "SCORE: 1", "é"]),
    max_size=30,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(TEXT)
def test_strip_think_is_the_two_substitutions(text: str) -> None:
    assert strip_think(text) == _OPEN_THINK.sub("", _THINK.sub("", text)).strip()


@settings(max_examples=600, deadline=None)
@given(TEXT)
def test_code_fences_is_the_lazy_findall(text: str) -> None:
    assert code_fences(text) == _FENCE.findall(text)


def test_strip_think_examples() -> None:
    assert strip_think("<think>a</think>answer") == "answer"
    assert strip_think("answer<think>cut off") == "answer"
    assert strip_think("<THINK>x</THINK> y <think>z</think>") == "y"
    # removing a block can join a new opening out of its neighbours: an unclosed trace
    assert strip_think("keep <thi<think>x</think>nk> gone") == "keep"
    assert strip_think("<think>" * 20_000) == "" and strip_think("a" + "</think>" * 5) == "a" + "</think>" * 5


def test_hostile_fences_and_lists() -> None:
    assert code_fences("```" + "a" * 100_000) == [] and code_fences("```" * 4) == ["", ""]
    assert code_fences('```json\n{"SCORE": 1}\n``` and ```x```') == ['{"SCORE": 1}\n', ""]
    items, outside, errors = numbered_items("\n" * 100_000 + "1. one\n\n3. three\nnote", "questions")
    assert items == ["one", "three"] and outside == ["note"] and errors == ["questions not numbered 1, 2, ...: '3. three'"]
