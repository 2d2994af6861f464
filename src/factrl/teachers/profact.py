"""A rule-based teacher that writes protocol-perfect ProFact episodes from AVeriTeC gold
(questions, answers, label) — the warm-up a small model needs before GRPO on the
process reward has any signal (an untrained 135M model never writes a ``<questions>``
block, so every reward is 0).

Stage by stage, through the real environment like any LM:

- **question stage**: the claim's gold questions (the first ``max_questions``, one line
  each, repeats dropped) as a numbered ``<questions>`` list;
- **search stage**, in each question's own context: a ``<search>`` with the question
  itself (a query the student can write), then an ``<answer>``: the gold answer when the
  search showed that question's gold unit — ``<claim>_qa_<i>`` in a pooled question-answer
  store, or an answer's ``source_url`` when that names a unit of the searched corpus (a
  generated world's sentence ids) — otherwise "The evidence does not answer this
  question." Answers rest on what was shown, never on knowledge the student could not
  have had;
- **verdict stage**: the gold label in ``<verdict>`` (AVeriTeC spelling). With
  ``reasoning="compare"`` (claims whose ``meta`` names the claimed value, as generated
  worlds' do) a ``<justification>`` first sets the claimed value beside the last answer
  of the record — ``The claim says 1942. A1 says 1977. Different, so the claim is
  refuted.`` — and a record whose last question went unanswered concludes Not Enough
  Evidence. ``read_labels`` (claim id → label) gives the label the justification reads
  when the verdict's label is another (a teacher wrong only at the conclusion,
  ``recipes.noisy_teacher``); for a claim the world leaves unstated (gold Not Enough
  Evidence) the slip follows ``No answer gives it``: ``No answer gives it, so the claim
  is refuted.``

``restate`` (claim ids) plants an error in the question stage: for those claims the
teacher asks one question, the claim restated as a yes-or-no question (``Is it true that
Kruskun is a city in Pusskov?``), far from the gold question in METEOR, and answers it
from the first gold question's answer when its evidence was shown — a warm-up whose
questions ProFact's process reward can correct. ``question_form="subject"`` asks instead
about the claim's subject alone (``What is known about Kruskun?``): it names neither the
attribute nor the claimed value (the restated question carries the value into the search
and the answer), so the answer stage must take the attribute from the claim.

Answers are cut at a word boundary to ``max_answer_chars`` so each turn fits the CPU
preset's 96-token turns. Which claim, stage and question a row belongs to comes from the
row's metadata (``claim_id``, ``role``, ``context``: the i-th search context answers the
teacher's own i-th question; ``context_turn``: the search call or the answer), never from
parsing the prompt; the context is read only for what the environment has shown after
the teacher's own search call (the ids retrieved).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from factrl.datasets.averitec import answer_text, qa_evidence_id
from factrl.labels import Label
from factrl.protocol.profact import AVERITEC_LABELS
from factrl.lm.scripted import ScriptedLM
from factrl.teachers.base import TEACHERS
from factrl.types import Claim

__all__ = ["ProFactTeacher", "NOT_ANSWERED", "QUESTION_FORMS", "REASONING", "about_subject", "restated"]

NOT_ANSWERED = "The evidence does not answer this question."
REASONING = ("none", "compare")
QUESTION_FORMS = ("restated", "subject")  # the planted question of a ``restate`` claim
_SHOWN = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_RECORD_ANSWER = re.compile(r"^A(\d+): (.*)$", re.M)
_CONCLUSION = {Label.SUPPORT: "so the claim is supported", Label.REFUTE: "so the claim is refuted",
               Label.NEI: "so there is not enough evidence", Label.CONFLICTING: "so the evidence conflicts"}
_SEEN = {Label.SUPPORT: "Same", Label.REFUTE: "Different"}
_LOWER_FIRST = frozenset({"The", "A", "An", "By", "In", "On", "At", "Of", "As", "People"})


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def restated(claim_text: str) -> str:
    """The claim as a yes-or-no question: ``Is it true that <claim>?``."""
    text = _one_line(claim_text).rstrip(" .!?")
    first, _, rest = text.partition(" ")
    if first in _LOWER_FIRST:
        text = f"{first.lower()} {rest}".rstrip()
    return f"Is it true that {text}?"


def about_subject(claim: Claim) -> str:
    """``What is known about <subject>?``: the claim's subject (the first entity of a
    generated world's claim chain) and nothing else."""
    chain = (claim.meta or {}).get("chain") or []
    name = chain[0].get("name") if chain and isinstance(chain[0], dict) else None
    if not name:
        raise ValueError(f"claim {claim.id}: the subject question needs a claim whose meta names its chain "
                         "(a generated world's claim); ask the restated question instead")
    return f"What is known about {_one_line(name)}?"


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = text[:max_chars].rsplit(" ", 1)[0].rstrip(" ,;:")
    return head + " …"


class ProFactTeacher(ScriptedLM):
    """``ProFactTeacher(claims, max_questions=…)``: AVeriTeC claims with gold questions."""

    name = "profact-teacher"

    def __init__(self, claims: Sequence[Claim], *, max_questions: int = 5, max_answer_chars: int = 300,
                 reasoning: str = "none", read_labels: Mapping[str, Label | None] | None = None,
                 restate: Collection[str] = (), question_form: str = "restated") -> None:
        if reasoning not in REASONING:
            raise ValueError(f"reasoning must be one of {', '.join(REASONING)}, got {reasoning!r}")
        if question_form not in QUESTION_FORMS:
            raise ValueError(f"question_form must be one of {', '.join(QUESTION_FORMS)}, got {question_form!r}")
        super().__init__(lambda context: self.respond_row(context, {}))
        self.by_id = {c.id: c for c in claims}
        self.max_questions = max_questions
        self.max_answer_chars = max_answer_chars
        self.reasoning = reasoning
        self.read_labels = dict(read_labels or {})
        self.restate = frozenset(restate)
        self.question_form = question_form
        if question_form == "subject":  # a claim without a subject is refused here, not mid-episode
            for cid in self.restate & self.by_id.keys():
                about_subject(self.by_id[cid])

    def gold(self, claim: Claim) -> list[tuple[str, str, frozenset[str]]]:
        """``(question, answer, evidence ids)`` of the claim's first ``max_questions``
        distinct gold questions; the answer joins the question's answers (Boolean ones
        with their explanation), as the loader's evidence text does; the ids are the pooled
        store's unit of that question and its answers' ``source_url`` values."""
        out: list[tuple[str, str, frozenset[str]]] = []
        seen: set[str] = set()
        for i, q in enumerate(claim.meta.get("questions") or []):
            question = _one_line(q.get("question", "")) if isinstance(q, dict) else ""
            if not question or question in seen:
                continue
            seen.add(question)
            answers = [a for a in q.get("answers") or [] if isinstance(a, dict)]
            answer = _one_line(" ".join(answer_text(a) for a in answers))
            sources = {str(a["source_url"]) for a in answers if a.get("source_url")}
            out.append((question, answer, frozenset({qa_evidence_id(claim.id, i), *sources})))
            if len(out) == self.max_questions:
                break
        return out

    def respond_row(self, context: str, meta: dict[str, Any]) -> str:
        claim = self.by_id.get(str(meta.get("claim_id")))
        if claim is None or claim.label is None:
            return "<verdict>Not Enough Evidence</verdict>"
        gold = self.gold(claim)
        if claim.id in self.restate:
            asked = [restated(claim.text) if self.question_form == "restated" else about_subject(claim)]
        else:
            asked = [q for q, _, _ in gold] or [_one_line(claim.text)]  # the questions this teacher writes
        if meta.get("role") == "search":
            index = int(meta.get("context", 0)) - 1  # the i-th search context answers question i
            if not 0 <= index < len(asked):
                return f"<answer>{NOT_ANSWERED}</answer>"
            item = gold[index] if index < len(gold) else None
            return self._search_turn(context, asked[index], item, int(meta.get("context_turn", 0)))
        if int(meta.get("context_turn", 0)) == 0:
            return "<questions>\n" + "\n".join(f"{n}. {q}" for n, q in enumerate(asked, 1)) + "\n</questions>"
        if self.reasoning == "compare" and (claim.meta or {}).get("claimed_value") not in (None, ""):
            return self._compared(context, claim)
        return f"<verdict>{AVERITEC_LABELS[claim.label]}</verdict>"

    def _compared(self, context: str, claim: Claim) -> str:
        """The verdict after a justification that sets the claimed value beside the
        record's last answer; nothing read concludes Not Enough Evidence (or, for an
        unstated claim, the slipped label ``read_labels`` plants)."""
        record = context.rpartition("Stage 3:")[2]
        answers = _RECORD_ANSWER.findall(record)
        said = f"The claim says {claim.meta['claimed_value']}."
        read = self.read_labels.get(claim.id) or claim.label
        if not answers or answers[-1][1].strip() == NOT_ANSWERED:
            # the reading of an unstated claim; a verdict slip on one keeps that reading
            label = claim.label if read is Label.NEI else Label.NEI
            reason = f"{said} No answer gives it, {_CONCLUSION[label]}."
        else:
            n, answer = answers[-1]
            label = claim.label
            seen = _SEEN.get(read, "It does not settle it")  # type: ignore[arg-type]
            reason = f"{said} A{n} says {answer.strip()}. {seen}, {_CONCLUSION[label]}."
        return f"<justification>{reason}</justification>\n<verdict>{AVERITEC_LABELS[label]}</verdict>"

    def _search_turn(self, context: str, question: str, item: tuple[str, str, frozenset[str]] | None,
                     turn: int) -> str:
        """Search ``question``, then answer from ``item``'s gold (the gold question the
        asked one stands for) when its evidence was shown."""
        call = f"<search>{question}</search>"
        if turn == 0:
            return call
        # what the environment showed after this teacher's own search call
        shown = set(_SHOWN.findall(context.rpartition(call)[2]))
        if item is not None and item[1] and item[2] & shown:
            return f"<answer>{_cut(item[1], self.max_answer_chars)}</answer>"
        return f"<answer>{NOT_ANSWERED}</answer>"


@TEACHERS.register("profact")
def _profact_teacher(claims: Sequence[Claim], params: dict[str, Any]) -> ProFactTeacher:
    """Sized to the environment's parameters (``max_questions``, default 5)."""
    return ProFactTeacher(claims, max_questions=int(params.get("max_questions", 5)),
                          reasoning=str(params.get("reasoning", "none")), read_labels=params.get("read_labels"),
                          restate=params.get("restate") or (),
                          question_form=str(params.get("question_form", "restated")))
