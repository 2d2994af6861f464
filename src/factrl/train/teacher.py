"""A rule-based teacher that writes protocol-perfect Veri-R1 trajectories from the gold
label and evidence — for format warm-up SFT when no strong LM is at hand.

The paper's SFT baseline (App. H) imitates GPT-4o trajectories; this teacher stands in
for it offline. It runs through the real environment and rollout runner like any LM
(text in, text out, character-level token ids), so its trajectories are ordinary
factrl records: ``train_sft`` re-encodes their text with the student's tokenizer. Its
reasoning is a template: it teaches the protocol, not judgement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from factrl.labels import Label
from factrl.lm.scripted import ScriptedLM
from factrl.types import Claim

__all__ = ["TemplateTeacher"]

_CLAIM = re.compile(r"Verify the claim:\n(.*?)\n", re.DOTALL)
_SHOWN = re.compile(r"\[\[([^\[\]\n]+?)\]\]")


class TemplateTeacher(ScriptedLM):
    """``TemplateTeacher(claims)``: answers each claim (found by its text in the prompt)
    with its gold label, citing the gold evidence ids it has seen in the context."""

    name = "template-teacher"

    def __init__(self, claims: Sequence[Claim]) -> None:
        super().__init__(self._respond)
        self.by_text = {c.text.strip(): c for c in claims}

    def _respond(self, context: str) -> str:
        m = _CLAIM.findall(context)
        claim = self.by_text.get(m[-1].strip()) if m else None
        if claim is None or claim.label is None:
            return "<answer>\nLabel: NOT ENOUGH INFO\nEvidence: \n</answer>"
        online = "<search>…</search>" in context
        after_prompt = context.split("Verify the claim:", 1)[1]
        shown = set(_SHOWN.findall(after_prompt))
        gold = [e for e in claim.evidence if e.id in shown]
        searches = after_prompt.count("<search>")
        if online and searches == 0:
            return f"<plan>Find what the literature says about the claim: {claim.text.strip()}</plan>\n<search>{claim.text.strip()}</search>"
        if online and claim.label is not Label.NEI and len(gold) < len(claim.evidence) and searches < 3:
            missing = next(e for e in claim.evidence if e.id not in shown)
            query = (missing.text or claim.text).strip()[:200]
            return f"<think>The results do not settle the claim yet.</think>\n<search>{query}</search>"
        return self._answer(claim, gold)

    @staticmethod
    def _answer(claim: Claim, gold: list) -> str:
        ids = ", ".join(f"[[{e.id}]]" for e in gold)
        if claim.label is Label.NEI or not gold:
            reason = "The information does not say enough to confirm or deny the claim."
            label = Label.NEI if not gold else claim.label
        elif claim.label is Label.SUPPORT:
            reason = f"The evidence {ids} states what the claim says, so it supports the claim."
            label = claim.label
        else:
            reason = f"The evidence {ids} contradicts the claim, so it refutes the claim."
            label = claim.label
        cited = ids if label is not Label.NEI else ""
        return f"<think>{reason}</think>\n<answer>\nLabel: {label.value}\nEvidence: {cited}\n</answer>"
