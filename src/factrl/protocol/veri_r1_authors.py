"""The Veri-R1 reward as the authors' released code computes it (``convention =
"authors_code"`` of :class:`~factrl.rewards.veri_r1.VeriR1RewardConfig`).

The authors' ``compute_reward`` (``verl/utils/reward_score/claim_reward.py`` of their
repository) reads the whole decoded response, ``<information>`` blocks included, with its
own rules. This module re-implements those rules (it is not their code) so factrl can
reproduce their training runs; ``tests/fixtures/veri_r1_authors_code.json`` holds
totals and components their code gave for a few hundred responses, and the
``authors_code`` convention must equal every one of them.

The rules, on the response text (after the first ``<|im_start|>assistant``, if any):

- answer: the last ``<answer>…</answer>`` (exact lower-case tags; each opening pairs with
  the first closing after it); none means no label and no evidence;
- label: the first ``Label:`` followed (after whitespace) by ``SUPPORTS``, ``REFUTES``,
  ``NOT ENOUGH INFO``, ``SUPPORT`` or ``REFUTE``, case-sensitive and read as a prefix
  (``SUPPORT.`` reads ``SUPPORT``); only the gold label's exact spelling is correct, so
  ``SUPPORTS`` is read and wrong;
- evidence: every ``[[…]]`` anywhere in that answer, stripped and NFC-normalised (``[[ ]]``
  is the empty id, and counts);
- format (0 or 1): every ``<information>`` comes right after ``</search>`` (whitespace
  between); of the tags ``<plan> <search> <information> <think> <answer>`` (exact
  spelling; any other tag is ignored), the last two are ``<answer>`` ``</answer>``, each
  appearing once, none nests in another (tags inside ``<information>`` are skipped), all
  close, and every ``</information>`` is followed by ``<think>``. Nothing else is
  checked: no ``<plan>``, text outside tags, the answer's content, the number of searches;
- evidence reward: IoU of the id sets, 0 whenever the gold set is empty;
- validity: 1 when every gold id is cited, 0.5 when at least half are (h >= 0.5), else 0;
  applied to SUPPORT/REFUTE gold only. The code defines no reward for other gold labels,
  so a CONFLICTING claim is an error here;
- verified / joint: label correct and, for SUPPORT/REFUTE, gold ⊆ cited / cited = gold;
  evidence cover: gold ⊆ cited (also for an episode without an answer).

factrl's "search budget is spent" notice is not part of the authors' observations and is
removed from the text after an ``</information>`` before these rules apply (its words
name ``<think>`` and ``<answer>``). factrl's over-budget observation (only when
``max_turns`` exceeds ``max_searches + 1``) names ``<answer>`` inside its
``<information>`` block and so fails the code's format, as the extra search fails the
paper convention's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from factrl.labels import Label
from factrl.protocol.notices import BUDGET_SPENT_NOTICES
from factrl.types import Trajectory

__all__ = [
    "AuthorsParse",
    "AuthorsJudgement",
    "AUTHORS_LABELS",
    "authors_format_ok",
    "authors_judge",
    "authors_text",
    "parse_authors",
    "trajectory_response",
]

# The spellings the code's label pattern reads, in the order it tries them.
AUTHORS_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO", "SUPPORT", "REFUTE")
_STRUCTURAL = frozenset({"plan", "search", "information", "think", "answer"})
_PREAMBLE = "<|im_start|>assistant"
_OPEN, _CLOSE = "<answer>", "</answer>"
_TAG = re.compile(r"<(/?)(\w+)>")
_SPACE = re.compile(r"\s*")
_LABEL_KEY = "Label:"
# factrl's notice after the last allowed search (its current and earlier wordings).
_NOTICES = tuple(re.escape(n.strip()) for n in BUDGET_SPENT_NOTICES)
_NOTICE_AFTER_INFO = re.compile(rf"(</information>)\s*(?:{'|'.join(_NOTICES)})")


@dataclass(frozen=True)
class AuthorsParse:
    """What the authors' code reads from one response."""

    label: str | None  # the spelling read (one of AUTHORS_LABELS), or None
    evidence_ids: tuple[str, ...]  # in order, duplicates kept, "" for ``[[ ]]``
    format_ok: bool
    answered: bool  # an <answer>…</answer> block was found


@dataclass(frozen=True)
class AuthorsJudgement:
    """The code's per-response judgements (before any weights)."""

    label_correct: bool
    evidence: float  # IoU, 0 when the gold set is empty
    hit_rate: float  # |P ∩ G| / |G|, 1 when G is empty
    cover: bool  # G ⊆ P
    verified: bool
    joint: bool
    format_ok: bool
    nei: bool  # gold NOT ENOUGH INFO: no validity weight
    parse: AuthorsParse


def authors_text(turns: Sequence[tuple[str, str]]) -> str:
    """The response the authors' code would have read from ``(source, text)`` segments:
    model and environment text in order, factrl's budget notice removed."""
    return _NOTICE_AFTER_INFO.sub(r"\1", "".join(text for _, text in turns))


def _last_answer(text: str) -> str | None:
    """Content of the last ``<answer>…</answer>`` (lazy pairing, left to right)."""
    found: str | None = None
    pos = 0
    while True:
        start = text.find(_OPEN, pos)
        if start < 0:
            return found
        end = text.find(_CLOSE, start + len(_OPEN))
        if end < 0:
            return found
        found, pos = text[start + len(_OPEN) : end], end + len(_CLOSE)


def _label(block: str) -> str | None:
    pos = block.find(_LABEL_KEY)
    while pos >= 0:
        after = _SPACE.match(block, pos + len(_LABEL_KEY))
        assert after is not None  # \s* matches the empty string
        for spelling in AUTHORS_LABELS:
            if block.startswith(spelling, after.end()):
                return spelling
        pos = block.find(_LABEL_KEY, pos + len(_LABEL_KEY))
    return None


def _bracketed(block: str) -> list[str]:
    """``[[x]]`` ids: the text up to the first ``]`` after ``[[`` (at least one character),
    which must be followed by a second ``]``; stripped, so blank text is the empty id."""
    ids: list[str] = []
    pos, close = 0, -1
    while True:
        start = block.find("[[", pos)
        if start < 0:
            return ids
        if close < start + 2:  # the first ']' after this '[[' (reused while it still is)
            close = block.find("]", start + 2)
            if close < 0:
                return ids
        if close > start + 2 and block.startswith("]]", close):
            ids.append(unicodedata.normalize("NFC", block[start + 2 : close].strip()))
            pos = close + 2
        else:
            pos = start + 1


def _information_after_search(text: str) -> bool:
    pos = text.find("<information>")
    while pos >= 0:
        end = pos
        while end > 0 and text[end - 1].isspace():
            end -= 1
        if not text.endswith("</search>", 0, end):
            return False
        pos = text.find("<information>", pos + 1)
    return True


def authors_format_ok(text: str) -> bool:
    """The code's format score (1 or 0) of a response body, as a bool."""
    if not _information_after_search(text):
        return False
    tags = [(bool(m.group(1)), m.group(2)) for m in _TAG.finditer(text) if m.group(2) in _STRUCTURAL]
    answer_open, answer_close = (False, "answer"), (True, "answer")
    if tags[-2:] != [answer_open, answer_close]:
        return False
    if tags.count(answer_open) != 1 or tags.count(answer_close) != 1:
        return False
    open_name: str | None = None
    for i, (closing, name) in enumerate(tags):
        if name == "information":
            if not closing:
                if open_name is not None:
                    return False
                open_name = name
                continue
            if open_name != name or i + 1 >= len(tags) or tags[i + 1] != (False, "think"):
                return False
            open_name = None
        elif open_name == "information":
            continue  # an observation's text may hold anything
        elif not closing:
            if open_name is not None:
                return False
            open_name = name
        elif open_name != name:
            return False
        else:
            open_name = None
    return open_name is None


def parse_authors(response: str) -> AuthorsParse:
    """Read ``response`` (model text with the observations) as the authors' code does."""
    body = response.split(_PREAMBLE, 1)[1] if _PREAMBLE in response else response
    block = _last_answer(body)
    if block is None:
        return AuthorsParse(None, (), authors_format_ok(body), answered=False)
    return AuthorsParse(_label(block), tuple(_bracketed(block)), authors_format_ok(body), answered=True)


def _gold_ids(ids: Sequence[str]) -> frozenset[str]:
    return frozenset(unicodedata.normalize("NFC", i.strip()) for i in ids)


def authors_judge(response: str, gold_label: Label, gold_evidence: Sequence[str]) -> AuthorsJudgement:
    """Judge one response against its gold label and evidence as the code does."""
    if gold_label not in (Label.SUPPORT, Label.REFUTE, Label.NEI):
        raise ValueError(
            f"the authors_code convention scores SUPPORT, REFUTE and NOT ENOUGH INFO claims only "
            f"(the released reward code defines no reward for {gold_label.value}); use convention='paper'"
        )
    parse = parse_authors(response)
    pred, gold = frozenset(parse.evidence_ids), _gold_ids(gold_evidence)
    hits = len(pred & gold)
    correct = parse.label == gold_label.value
    nei = gold_label is Label.NEI
    cover = gold <= pred
    return AuthorsJudgement(
        label_correct=correct,
        evidence=hits / len(pred | gold) if gold else 0.0,
        hit_rate=hits / len(gold) if gold else 1.0,
        cover=cover,
        verified=correct and (nei or cover),
        joint=correct and (nei or pred == gold),
        format_ok=parse.format_ok,
        nei=nei,
        parse=parse,
    )


def trajectory_response(traj: Trajectory) -> str:
    """The response text of an episode as the authors' code reads it: every turn (model
    text and observations) in order, factrl's budget notice removed; ``""`` for an episode
    that ended in an error (scored as no answer, as under the paper convention)."""
    if traj.error:
        return ""
    if not traj.turns:
        raise ValueError(
            f"claim {traj.claim_id!r}: convention 'authors_code' scores the response text, and "
            f"this trajectory records no turns"
        )
    return authors_text([(t.source, t.text) for t in traj.turns])
