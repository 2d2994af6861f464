"""Short-form questions over a world for Binary RAR's answer-accuracy measure (001, §4.1:
short-form QA with abstention allowed, string-matched against gold answers).

Per entity (the entity's long-form prompt's split, so training and held-out prompts
never share an entity), with the entity's document as its ``documents``:

- one **answerable** question about a fact the document states ("Where was X born?"),
  with gold ``answers`` — the value as the world writes it, plus its plain forms (a
  number without separators, a category word without its article);
- one **unanswerable** question about an attribute the world leaves unstated (when the
  entity has one), without ``answers``: the right response is "I don't know", and any
  answer is a guess the notes cannot back.

Rows are :mod:`factrl.datasets.rar_prompts` rows (``kind`` ``short``) with
``answerable``, ``attribute``, ``entity`` and ``world_seed`` kept in ``meta``.
"""

from __future__ import annotations

import random
from typing import Any

from factrl.datasets.factworld.schema import attribute
from factrl.datasets.factworld.world import Entity, World

__all__ = ["gold_answers", "short_questions"]


def gold_answers(world: World, entity: Entity, name: str) -> list[str]:
    """The accepted answers to the question about ``entity``'s stated attribute ``name``."""
    attr = attribute(entity.type, name)
    value = entity.facts[name]
    text = world.render(attr, value)
    answers = [text]
    if attr.kind == "number":
        answers.append(str(int(value)))
    if attr.article:
        answers.append(str(value))
    return list(dict.fromkeys(answers))


def _row(seed: int, e: Entity, name: str, doc: dict[str, Any], answers: list[str] | None) -> dict[str, Any]:
    attr = attribute(e.type, name)
    row: dict[str, Any] = {"id": f"fw{seed}-short-{e.id}-{name}", "prompt": attr.question.format(S=e.name),
                           "kind": "short"}
    if answers:
        row["answers"] = answers
    row.update({"documents": [{"id": e.id, "title": e.name, "text": doc["text"]}], "entity": e.name,
                "entity_type": e.type, "attribute": name, "answerable": answers is not None, "world_seed": seed})
    return row


def short_questions(seed: int, world: World, docs: dict[str, dict[str, Any]], entities: list[Entity],
                    rng: random.Random) -> list[dict[str, Any]]:
    """The questions about ``entities`` (in their order): per entity an answerable one,
    then an unanswerable one when the world leaves an attribute of it unstated. ``docs``
    maps entity ids to corpus rows; ``rng`` picks the attributes."""
    out = []
    for e in entities:
        stated = sorted(e.facts)
        if stated:
            name = rng.choice(stated)
            out.append(_row(seed, e, name, docs[e.id], gold_answers(world, e, name)))
        if e.unstated:
            out.append(_row(seed, e, rng.choice(sorted(e.unstated)), docs[e.id], None))
    return out
