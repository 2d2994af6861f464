"""A rule-based teacher that plays both HARIS agents (the reasoner and its search agent)
from a claim's gold hops — the warm-up the 135M model needs before coordinated GRPO has
any signal (untrained, it rarely asks a question, so every reward is 0).

Through the real environment like any LM (one scripted model for both roles, as the
recipe's warm-up trains one model for both):

- **reasoner**, turn k: asks the claim's k-th gold question (a generated world's
  per-hop questions, ``claim.meta["questions"]``; a claim without them asks the claim
  itself) — but only while every earlier report answered its question: a hop's question
  names the entity the previous hop found, which the reasoner knows only from a report.
  Then ``<verification>`` with the (given, possibly noisy) label read two-way (NOT
  ENOUGH INFO is Refute, the paper's scale), after a ``<think>`` that sets the claimed
  value beside the value reported last — unless a hop went unanswered (the search missed
  its sentence): nothing then supports the claim, so a Support label is verified Refute
  (``missed_hop="refute"``, the default; ``"label"`` gives the label whatever the reports
  said, a guess the student could not have justified). ``claim_first`` also writes the
  claimed value in the first turn's ``<think>`` ("The claim says V. I need to find …"):
  the final comparison then repeats a phrase the student wrote itself, next to the claim,
  instead of copying a value from a claim many turns back (a 135M student writes the
  value it found as the claimed one and reads ``Same`` whatever the claim said; measured,
  this setting does not stop its ``Same`` from ignoring the values beside it).
  ``read_labels`` (claim id →
  label) gives the label the comparison reads (``Same`` / ``Different``) when the verdict's
  label is another: a teacher wrong only at the conclusion (``recipes.noisy_teacher``);
- **search agent**, in the i-th question's context: ``<search>`` with the question, then
  a ``<report>`` quoting the shown sentence whose id is that question's gold source, with
  its answer — or that nothing shown answers it. A report rests on what was shown,
  never on knowledge the student could not have had.

Which claim, role and turn a row belongs to comes from the row's metadata (``claim_id``,
``role``, ``context``, ``context_turn``); the context is read only for what the
environment showed (the sentences after the teacher's own search, the reports in
``<result>`` blocks).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from factrl.lm.scripted import ScriptedLM
from factrl.protocol.haris import binary_gold
from factrl.teachers.base import TEACHERS
from factrl.types import Claim, Label, Trajectory, Turn

__all__ = ["HarisTeacher", "NOT_FOUND", "comparison_copies"]

NOT_FOUND = "No passage found answers this question."
MISSED_HOP = ("refute", "label")  # a Support label after an unanswered hop: verified Refute / kept
_LINE = re.compile(r"^\[\[([^\[\]\n]+?)\]\]: (.*)$", re.M)
_COMPARE = re.compile(r"The claim says (?P<claimed>.+?)\. The search agent found (?P<found>.+?)\. "
                      r"(?P<word>Same|Different), so the claim is (?:supported|refuted)\.")
_RESULT = re.compile(r"<result>\n(.*?)\n</result>", re.S)  # the env's blocks, not the prompt's "<result> </result>"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _claimed(claim: Claim) -> str:
    """The value the claim asserts (a generated world's ``meta["claimed_value"]``), or ""."""
    return _one_line(str(claim.meta.get("claimed_value") or ""))


class HarisTeacher(ScriptedLM):
    """``HarisTeacher(claims, max_questions=…, missed_hop=…)``: claims with gold labels
    (and, where the data has them, per-hop gold questions with answers and source sentence
    ids)."""

    name = "haris-teacher"

    def __init__(self, claims: Sequence[Claim], *, max_questions: int = 5, missed_hop: str = "refute",
                 read_labels: Mapping[str, Label | None] | None = None, claim_first: bool = False) -> None:
        self.read_labels = dict(read_labels or {})
        self.claim_first = bool(claim_first)
        if missed_hop not in MISSED_HOP:
            raise ValueError(f"missed_hop must be one of {', '.join(MISSED_HOP)}, got {missed_hop!r}")
        super().__init__(lambda context: self.respond_row(context, {}))
        self.by_id = {c.id: c for c in claims}
        self.max_questions = max_questions
        self.missed_hop = missed_hop

    def hops(self, claim: Claim) -> list[tuple[str, str, str]]:
        """``(question, answer, source sentence id)`` per gold hop, at most
        ``max_questions``; a claim without per-hop questions: the claim itself, answered
        by any of its gold evidence sentences (source "")."""
        out = []
        for q in claim.meta.get("questions") or []:
            if not isinstance(q, dict) or not _one_line(q.get("question", "")):
                continue
            answers = [a for a in q.get("answers") or [] if isinstance(a, dict)]
            first = answers[0] if answers else {}
            source = str(first.get("source_url") or "")
            out.append((_one_line(q["question"]), _one_line(first.get("answer", "")) if source else "", source))
        out = out[: self.max_questions]
        return out or [(_one_line(claim.text), "", "")]

    def respond_row(self, context: str, meta: dict[str, Any]) -> str:
        claim = self.by_id.get(str(meta.get("claim_id")))
        if claim is None or claim.label is None:
            return "<verification> The final verification is \\boxed{Refute} </verification>"
        hops = self.hops(claim)
        if meta.get("role") == "searcher":
            index = int(meta.get("context", 0)) - 1  # the i-th search context answers question i
            if not 0 <= index < len(hops):
                return f"<report>{NOT_FOUND}</report>"
            return self._search_turn(context, claim, hops[index], int(meta.get("context_turn", 0)))
        reports = _RESULT.findall(context)
        asked = len(reports)
        answered = all(self._answers(r, hops[i]) for i, r in enumerate(reports) if i < len(hops))
        if asked < len(hops) and answered:
            why = "I need to find" if asked == 0 else "Next I need to find"
            if asked == 0 and self.claim_first and _claimed(claim):
                why = f"The claim says {_claimed(claim)}. {why}"
            return f"<think>{why} a bridging fact.</think>\n<question>{hops[asked][0]}</question>"
        return self._verification(claim, hops, reports)

    def _answers(self, report: str, hop: tuple[str, str, str]) -> bool:
        """Whether a report answered the hop (its gold answer in the report's text)."""
        _, answer, _ = hop
        return NOT_FOUND not in report and (not answer or answer.lower() in report.lower())

    def _verification(self, claim: Claim, hops: list[tuple[str, str, str]], reports: list[str]) -> str:
        label = binary_gold(claim.label)
        claimed = _claimed(claim)
        last = _one_line(reports[-1]) if reports else ""
        missed = next((hop for i, hop in enumerate(hops) if i >= len(reports) or not self._answers(reports[i], hop)),
                      None)
        if label is Label.SUPPORT and missed is not None and self.missed_hop == "refute":
            why = f"The search agent did not find the answer to \"{missed[0]}\", so nothing supports the claim."
            return _verdict(why, "Refute")
        if last and NOT_FOUND not in last and claimed:
            found = hops[len(reports) - 1][1] if len(reports) <= len(hops) else ""
            word = "Same" if binary_gold(self.read_labels.get(claim.id) or claim.label) is Label.SUPPORT else "Different"
            why = f"The claim says {claimed}. The search agent found {found or last}. {word}, so the claim is " + (
                "supported." if label is Label.SUPPORT else "refuted.")
        elif label is Label.SUPPORT:
            why = "The search agent's reports agree with the claim, so the claim is supported."
        else:
            why = "The search agent found nothing that supports the claim, so the claim is not supported."
        return _verdict(why, "Support" if label is Label.SUPPORT else "Refute")

    def _search_turn(self, context: str, claim: Claim, hop: tuple[str, str, str], turn: int) -> str:
        question, answer, source = hop
        call = f"<search>{question}</search>"
        if turn == 0:
            return f"<think>I will search for the question.</think>\n{call}"
        shown = dict(_LINE.findall(context.rpartition(call)[2]))  # what this teacher's search showed
        wanted = [source] if source else claim.evidence_ids
        for sid in wanted:
            if sid in shown:
                sentence = shown[sid].split(" — ", 1)[-1]  # a document's first line carries its title
                head = f"{answer}. " if answer else ""
                return f"<think>[[{sid}]] answers it.</think>\n<report>{head}{sentence}</report>"
        return f"<think>Nothing shown answers it.</think>\n<report>{NOT_FOUND}</report>"


@TEACHERS.register("haris")
def _haris_teacher(claims: Sequence[Claim], params: dict[str, Any]) -> HarisTeacher:
    """Sized to the environment's question budget (``max_questions``, default 5); claims
    whose label has no Support / Refute reading (CONFLICTING) are refused by id."""
    bad = [c.id for c in claims if c.label is not None and binary_gold(c.label) is None]
    if bad:
        raise ValueError(f"the haris teacher verifies Support or Refute; {len(bad)} claim(s) have a label with "
                         f"no such reading (e.g. {', '.join(bad[:3])}): leave them out (--ids)")
    return HarisTeacher(claims, max_questions=int(params.get("max_questions", 5)),
                        missed_hop=str(params.get("missed_hop", "refute")), read_labels=params.get("read_labels"),
                        claim_first=bool(params.get("claim_first", False)))


def comparison_copies(trajectories: Sequence[Trajectory], seed: int = 0) -> tuple[list[Trajectory], int]:
    """``(copies, skipped)``: for each teacher episode whose verification compares the
    claimed value with the one found ("The claim says X. The search agent found Y. Same,
    …"), one reasoner-only copy where the last report found another value — the claimed
    one after a ``Different`` (so the copy reads ``Same``), another value of the same
    attribute found in another episode after a ``Same`` (so it reads ``Different``) — and
    only the final verification is trained (earlier model turns become context, the search
    agent's contexts are left out). Each claim's context is then seen with both words,
    told apart only by the two values: the comparison a 135M student otherwise reads
    ``Same`` whatever the values (docs/haris.md). A copy concludes as the teacher's own
    episodes with that word concluded (their verdict slip kept, seeded by claim id).
    Skipped (counted): episodes with no other value of their attribute to swap in."""
    found: list[tuple[Trajectory, re.Match[str]]] = []
    for t in trajectories:
        m = _COMPARE.search(t.turns[-1].text) if t.turns and t.turns[-1].source == "model" else None
        if m and len(t.turns) >= 2 and m["found"] in t.turns[-2].text:
            found.append((t, m))
    concluded = {w: Counter("Support}" in t.turns[-1].text for t, m in found if m["word"] == w)
                 for w in ("Same", "Different")}
    values: dict[str, set[str]] = {}
    for t, m in found:
        values.setdefault(_attribute(t.claim), set()).add(m["found"])
    copies, skipped = [], 0
    for t, m in found:
        rng = random.Random(f"{seed}:{t.claim_id}:copy")
        if m["word"] == "Different":
            new, word = m["claimed"], "Same"
        else:
            others = sorted(values[_attribute(t.claim)] - {m["found"], m["claimed"]})
            if not others:
                skipped += 1
                continue
            new, word = rng.choice(others), "Different"
        counts = concluded[word] or Counter({word == "Same": 1})
        support = rng.random() < counts[True] / (counts[True] + counts[False])
        copies.append(_copy(t, m, new, word, support))
    return copies, skipped


def _attribute(claim: Claim) -> str:
    chain = claim.meta.get("chain") or []
    return str(chain[-1].get("attribute", "")) if chain and isinstance(chain[-1], dict) else ""


def _verdict(why: str, box: str) -> str:
    """The reasoner's closing turn: its reason, then the boxed two-way verdict."""
    return f"<think>{why}</think>\n<verification> The final verification is \\boxed{{{box}}} </verification>"


def _copy(t: Trajectory, m: re.Match[str], new: str, word: str, support: bool) -> Trajectory:
    report = t.turns[-2]
    why = (f"The claim says {m['claimed']}. The search agent found {new}. {word}, so the claim is "
           + ("supported." if support else "refuted."))
    final = _verdict(why, "Support" if support else "Refute")
    context = [tu if tu.source == "env" else Turn(source="env", text=tu.text, token_ids=tu.token_ids,
                                                  mask=[0] * len(tu.mask)) for tu in t.turns[:-2]]
    turns = [*context, report.model_copy(update={"text": report.text.replace(m["found"], new)}),
             Turn(source="model", text=final, token_ids=[], mask=[])]
    return t.model_copy(update={"turns": turns, "segments": [], "meta": {**t.meta, "comparison_copy": word}})
