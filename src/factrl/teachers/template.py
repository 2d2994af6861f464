"""A rule-based teacher that writes protocol-perfect Veri-R1 trajectories from the gold
label and evidence — for format warm-up SFT when no strong LM is at hand.

The paper's SFT baseline (App. H) imitates GPT-4o trajectories; this teacher stands in
for it offline. It runs through the real environment and rollout runner like any LM
(text in, text out, character-level token ids), so its trajectories are ordinary
factrl records: ``train_sft`` re-encodes their text with the student's tokenizer. Its
reasoning is a template: it teaches the protocol, not judgement.

It knows which claim a row belongs to from the row's generation metadata (the episode
machine passes the claim id) and whether the agent searches (online) from the agent's
parameters (:func:`make_teacher`), never by parsing the prompt; it reads the context only
for what the environment has shown so far (``[[id]]`` lines, searches made).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from factrl.labels import Label
from factrl.lm.scripted import ScriptedLM
from factrl.teachers.base import TEACHERS
from factrl.types import Claim

__all__ = ["TemplateTeacher"]

_SHOWN = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_CONCLUSION = {Label.SUPPORT: "so the claim is supported", Label.REFUTE: "so the claim is refuted",
               Label.NEI: "so there is not enough information"}


class TemplateTeacher(ScriptedLM):
    """``TemplateTeacher(claims, online=...)``: answers each claim (by the claim id of the
    row) with its gold label, citing the gold evidence ids it has seen in the context;
    ``online`` says whether the environment searches (the agent's ``mode``).

    ``quote=True`` makes the reasoning quote the first cited sentence (up to
    ``quote_words`` words) before the judgement, so the student learns to point at the
    sentence its label rests on. ``gold_requery=False`` keeps every search honest: the
    teacher searches once with the claim and answers from what it saw (a claim whose
    evidence that search missed then ends NOT ENOUGH INFO, is not fully correct, and
    ``select_correct`` drops it) instead of re-searching with the gold sentence's text,
    a query the student could never have written.

    ``compare=True`` (for claims whose ``meta`` names the claimed value and the chain of
    facts, as generated worlds' claims do) makes the reasoning set the two values side by
    side before the judgement — ``The claim says 1853. [[id]] says 1852. Different, so the
    claim is refuted.`` — so the decision rests on a comparison the student can see; other
    claims keep the quote or plain reasoning.
    """

    name = "template-teacher"

    def __init__(self, claims: Sequence[Claim], *, online: bool, quote: bool = False, quote_words: int = 30,
                 gold_requery: bool = True, compare: bool = False,
                 read_labels: Mapping[str, Label | None] | None = None) -> None:
        super().__init__(lambda context: self.respond_row(context, {}))
        self.by_id = {c.id: c for c in claims}
        self.online = bool(online)
        self.quote = quote
        self.quote_words = quote_words
        self.gold_requery = gold_requery
        self.compare = compare
        self.read_labels = dict(read_labels or {})

    def respond_row(self, context: str, meta: dict[str, Any]) -> str:
        claim = self.by_id.get(str(meta.get("claim_id")))
        if claim is None or claim.label is None:
            return "<answer>\nLabel: NOT ENOUGH INFO\nEvidence: \n</answer>"
        online = self.online
        # What the environment has shown: gold ids appear only in its <information>
        # blocks (the prompt's protocol text shows placeholder ids such as e_1).
        shown = set(_SHOWN.findall(context))
        gold = [e for e in claim.evidence if e.id in shown]
        searches = int(meta.get("context_turn", 0)) if online else 0  # every earlier turn ended in a search
        if online and searches == 0:
            return f"<plan>Find what the literature says about the claim: {claim.text.strip()}</plan>\n<search>{claim.text.strip()}</search>"
        if (self.gold_requery and online and claim.label is not Label.NEI and len(gold) < len(claim.evidence)
                and searches < 3):
            missing = next(e for e in claim.evidence if e.id not in shown)
            query = (missing.text or claim.text).strip()[:200]
            return f"<think>The results do not settle the claim yet.</think>\n<search>{query}</search>"
        shown = self._shown_text(context) if (self.quote or self.compare) else None
        return self._answer(claim, gold, shown)

    def _shown_text(self, context: str) -> dict[str, str]:
        """``{id: sentence}`` of the ``[[id]]: text`` lines shown so far."""
        out = {}
        for line in context.splitlines():
            m = re.match(r"\s*\[\[([^\[\]\n]+?)\]\]:\s*(.*)", line)
            if m:
                out[m.group(1)] = m.group(2).strip()
        return out

    def _quote(self, gold: list, shown: dict[str, str] | None) -> str:
        if not shown or not gold:
            return ""
        words = (shown.get(gold[0].id) or gold[0].text or "").split()
        if not words:
            return ""
        text = " ".join(words[: self.quote_words]) + (" …" if len(words) > self.quote_words else "")
        return f'[[{gold[0].id}]] says: "{text}" '

    def _compared(self, claim: Claim, gold: list, label: Label) -> str | None:
        """The side-by-side reasoning of ``compare``, or None when the claim's meta cannot
        give it (then the quote or plain reasoning is used)."""
        meta = claim.meta or {}
        chain, claimed = meta.get("chain") or [], meta.get("claimed_value")
        if not self.compare or not chain or claimed in (None, ""):
            return None
        said = f"The claim says {claimed}."
        read = self._read(claim, gold)
        if read is Label.NEI:
            return f"{said} No sentence gives it, so there is not enough information."
        last = chain[-1] if isinstance(chain[-1], dict) else {}
        sid, value = last.get("sentence_id"), last.get("value")
        if not sid or value in (None, "") or sid not in {e.id for e in gold}:
            return None
        seen = "Same" if read is Label.SUPPORT else "Different"
        return f"{said} [[{sid}]] says {value}. {seen}, {_CONCLUSION[label]}."

    def _read(self, claim: Claim, gold: list) -> Label:
        """What the evidence shown says about ``claim`` — the label the reasoning reads
        before it concludes: ``read_labels``' entry for the claim, else its own label (a
        teacher wrong only at the verdict, ``recipes.noisy_teacher``, reads the gold one)."""
        read = self.read_labels.get(claim.id) or claim.label
        return Label.NEI if (read is Label.NEI or not gold) else read

    def _answer(self, claim: Claim, gold: list, shown: dict[str, str] | None = None) -> str:
        ids = ", ".join(f"[[{e.id}]]" for e in gold)
        label_now = Label.NEI if (claim.label is Label.NEI or not gold) else claim.label
        compared = self._compared(claim, gold, label_now) if claim.label is not None else None
        if compared is not None:
            cited = ids if label_now is not Label.NEI else ""
            return f"<think>{compared}</think>\n<answer>\nLabel: {label_now.value}\nEvidence: {cited}\n</answer>"
        quote = self._quote(gold, shown) if self.quote else ""
        read = self._read(claim, gold)
        if read is Label.NEI:
            reason = ("None of the information states or contradicts what the claim says."
                      if self.quote else "The information does not say enough to confirm or deny the claim.")
            label = Label.NEI
        else:
            label = claim.label
            seen = "states what the claim says" if read is Label.SUPPORT else "contradicts the claim"
            verdict = {Label.SUPPORT: "so it supports the claim", Label.REFUTE: "so it refutes the claim",
                       Label.NEI: "so there is not enough information"}[label]
            reason = f"{quote}This {seen}, {verdict}." if quote else f"The evidence {ids} {seen}, {verdict}."
        cited = ids if label is not Label.NEI else ""
        return f"<think>{reason}</think>\n<answer>\nLabel: {label.value}\nEvidence: {cited}\n</answer>"


@TEACHERS.register("veri_r1")
def _veri_r1_teacher(claims: Sequence[Claim], params: dict[str, Any]) -> TemplateTeacher:
    """Online unless the agent's ``mode`` says offline (the environment's own default)."""
    return TemplateTeacher(claims, online=params.get("mode", "online") == "online")


# `factrl train teach` writes offline episodes unless told otherwise: the template's
# single search is a stand-in, the offline context is the real thing.
_veri_r1_teacher.env_defaults = {"mode": "offline"}  # type: ignore[attr-defined]
