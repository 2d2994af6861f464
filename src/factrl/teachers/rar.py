"""Binary RAR's rule-based teacher for prompts that show notes (``rar`` with
``show_documents``): it restates the first ``max_sentences`` sentences of the notes, and
with probability ``noise`` per sentence swaps the stated value for another value of the
same attribute the world gives some other entity — a contradiction the exact verifier
(:mod:`factrl.rewards.rar_factworld`) catches. A warm-up on its responses learns to write
from the notes *and* to make such errors sometimes; Binary RAR's reward is there to unlearn
them.

Asked one of the world's short-form questions (``rar_short/``: "Where was X born?", the
first paragraph after the notes), it answers with the one sentence of the notes that states
the asked attribute of that entity — wrong, by the same swap, with probability ``noise``
— and, when the notes state none (an attribute the world leaves unstated), "I don't
know." A warm-up on those answers learns to answer from the notes, and to answer wrong
sometimes; Binary RAR's reward unlearns the wrong values (a swapped value is a
contradiction, a right one or an abstention is not).

Without a ``world`` (a directory ``factrl data factworld`` wrote) it cannot tell a value
from the rest of a sentence, so it restates the notes as they are (``noise`` must be 0).
The draws are seeded by ``seed`` and the sentence, so a run is reproducible.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factrl.lm.scripted import ScriptedLM
from factrl.teachers.base import TEACHERS
from factrl.types import Claim

__all__ = ["RarTeacher"]


class RarTeacher(ScriptedLM):
    def __init__(self, *, world: Any = None, noise: float = 0.0, seed: int = 0, max_sentences: int = 4) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        if noise > 0 and world is None:
            raise ValueError("a noisy Binary RAR teacher needs the world (world=DIR) to swap values")
        super().__init__(self._respond)
        self.noise, self.seed, self.max_sentences = noise, seed, max_sentences
        self.world = _load_world(world)
        self._values = _values_by_attribute(self.world) if self.world is not None else {}
        self._questions: dict[str, tuple[str, str]] | None = None  # question -> (entity id, attribute)
        self.swapped = 0  # sentences written wrong on purpose (all responses so far)

    def _respond(self, context: str) -> str:
        from factrl.corpus.sentences import split_sentences
        from factrl.envs.rar import notes_of

        notes = notes_of(context)
        if not notes:
            return "I have no notes on this."
        asked = self._asked(context)
        if asked is not None:
            return self._answer(split_sentences(notes), *asked)
        said = [self._maybe_wrong(s) for s in split_sentences(notes)[: self.max_sentences]]
        return " ".join(said)

    def _asked(self, context: str) -> tuple[str, str] | None:
        """(entity id, attribute) of the world's short-form question the prompt asks, or
        None (a long-form prompt, or no world to read questions from)."""
        from factrl.envs.rar import NOTES_HEADER

        if self.world is None:
            return None
        if self._questions is None:
            from factrl.datasets.factworld.schema import attribute

            self._questions = {attribute(e.type, name).question.format(S=e.name): (e.id, name)
                               for e in self.world.world.entities for name in (*e.facts, *e.unstated)}
        after_notes = context.partition(NOTES_HEADER + "\n")[2].split("\n\n")
        question = after_notes[1].strip() if len(after_notes) > 1 else ""
        return self._questions.get(question)

    def _answer(self, sentences: list[str], entity: str, name: str) -> str:
        """The sentence of the notes stating ``entity``'s ``name`` (maybe swapped), else
        an abstention."""
        for sentence in sentences:
            j = self.world.judge(sentence)
            if j.verdict == "supported" and (j.entity, j.attribute) == (entity, name):
                return self._maybe_wrong(sentence)
        return "I don't know."

    def _maybe_wrong(self, sentence: str) -> str:
        if self.noise <= 0 or self.world is None:
            return sentence
        digest = hashlib.sha256(f"{self.seed}\n{sentence}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        if rng.random() >= self.noise:
            return sentence
        j = self.world.judge(sentence)
        if j.verdict != "supported" or not j.asserted or j.asserted not in sentence:
            return sentence  # not a stated value it can swap (e.g. "X is a person.")
        others = [v for v in self._values.get(j.attribute or "", []) if v != j.asserted]
        rng.shuffle(others)
        for value in others[:8]:
            wrong = sentence.replace(j.asserted, value, 1)
            if self.world.check(wrong) == "contradicted":
                self.swapped += 1
                return wrong
        return sentence


def _load_world(world: Any) -> Any:
    if world is None:
        return None
    from factrl.datasets.factworld import FactWorld

    return world if isinstance(world, FactWorld) else FactWorld.load(Path(world))


def _values_by_attribute(checker: Any) -> dict[str, list[str]]:
    """attribute name -> the rendered values the world states for it (sorted, distinct)."""
    from factrl.datasets.factworld.schema import attribute

    values: dict[str, set[str]] = {}
    for e in checker.world.entities:
        for name, value in e.facts.items():
            values.setdefault(name, set()).add(checker.world.render(attribute(e.type, name), value))
    return {k: sorted(v) for k, v in values.items()}


@TEACHERS.register("rar")
def _rar_teacher(claims: Sequence[Claim], params: dict[str, Any]) -> RarTeacher:
    """The clean teacher (``factrl train teach --agent rar``); the factworld recipe makes
    a noisy one with its world. The environment must show the notes."""
    del claims
    if not params.get("show_documents"):
        raise ValueError("the Binary RAR teacher writes from the prompt's notes: run rar with show_documents=true")
    return RarTeacher()


_rar_teacher.env_defaults = {"show_documents": True}  # type: ignore[attr-defined]
