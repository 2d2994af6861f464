"""A rule-based teacher that writes protocol-perfect Veri-R1 trajectories from the gold
label and evidence — for format warm-up SFT when no strong LM is at hand.

The paper's SFT baseline (App. H) imitates GPT-4o trajectories; this teacher stands in
for it offline. It runs through the real environment and rollout runner like any LM
(text in, text out, character-level token ids), so its trajectories are ordinary
factrl records: ``train_sft`` re-encodes their text with the student's tokenizer. Its
reasoning is a template: it teaches the protocol, not judgement.

It knows which claim a row belongs to from the row's generation metadata (the episode
machine passes the claim id), never by parsing the prompt; it reads the context only
for what the environment has shown so far (``[[id]]`` lines, searches made).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from factrl.labels import Label
from factrl.lm.scripted import ScriptedLM
from factrl.types import Claim

__all__ = ["TemplateTeacher"]

_SHOWN = re.compile(r"\[\[([^\[\]\n]+?)\]\]")


class TemplateTeacher(ScriptedLM):
    """``TemplateTeacher(claims)``: answers each claim (by the claim id of the row) with
    its gold label, citing the gold evidence ids it has seen in the context."""

    name = "template-teacher"

    def __init__(self, claims: Sequence[Claim]) -> None:
        super().__init__(lambda context: self.respond_row(context, {}))
        self.by_id = {c.id: c for c in claims}

    def respond_row(self, context: str, meta: dict[str, Any]) -> str:
        claim = self.by_id.get(str(meta.get("claim_id")))
        if claim is None or claim.label is None:
            return "<answer>\nLabel: NOT ENOUGH INFO\nEvidence: \n</answer>"
        online = "<search>…</search>" in context
        # What the environment showed after the prompt's own protocol description.
        after_prompt = context.split(claim.text.strip(), 1)[-1]
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
