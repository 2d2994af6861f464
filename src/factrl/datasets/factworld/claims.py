"""Claims over a world: chains of facts, labelled, with gold sentences and gold questions.

A claim of ``h`` hops follows ``h - 1`` stated relations from a named entity and asserts
a value of the last entity's final attribute: "The founder of X was born in Y" is
founder(X) = P, birthplace(P) = Y (two hops). The label decides the final value:

- SUPPORT: the true value; gold evidence = the sentence of every fact on the chain;
- REFUTE: a plausible wrong value of the same type (another entity of the type — often
  the true one's look-alike —, another category word, a nearby year, a scaled number);
  same gold evidence, whose last sentence contradicts the claim;
- NOT ENOUGH INFO: the final attribute is one the world leaves unstated; no gold
  evidence (the chain's sentences are kept in ``meta["chain_evidence"]``).

Each claim also carries AVeriTeC-style gold questions, one per hop, answered from the
world (:func:`questions`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from factrl.datasets.factworld.schema import NOT_FOUND, TYPES, Attribute, attribute, attributes_of
from factrl.datasets.factworld.world import Entity, World
from factrl.labels import Label

__all__ = ["Hop", "WorldClaim", "ClaimMaker", "TooFewClaims", "questions", "claim_row"]


@dataclass(frozen=True)
class Hop:
    """One fact on a claim's chain: ``attribute`` of ``entity`` (an id), its true value
    (None when unstated) and the sentence stating it."""

    entity: str
    attribute: str
    value: Any
    sentence_id: str | None


@dataclass(frozen=True)
class WorldClaim:
    """A generated claim before it gets an id: the chain (relations, then the final
    fact), the value the claim asserts, and whether its final wording differs from the
    document's (None for NOT ENOUGH INFO: there is no document sentence)."""

    text: str
    label: Label
    hops: tuple[Hop, ...]
    claimed: Any
    paraphrased: bool | None


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


class TooFewClaims(ValueError):
    """The world cannot give as many distinct claims of a kind as were asked for (how many
    distinct chains a world holds varies with its seed)."""


class ClaimMaker:
    """Draws claims from one world with one ``random.Random``; never the same assertion
    (chain, final attribute, value) twice."""

    def __init__(self, world: World, rng: random.Random, *, paraphrase_rate: float) -> None:
        self.world = world
        self.rng = rng
        self.paraphrase_rate = paraphrase_rate
        self.ids = {t: [e.id for e in world.of_type(t)] for t in TYPES}
        self.twins: dict[str, list[str]] = {}
        for e in world.entities:
            if e.twin_of:
                self.twins.setdefault(e.twin_of, []).append(e.id)
                self.twins.setdefault(e.id, []).append(e.twin_of)
        self.seen: set[tuple[Any, ...]] = set()
        self.texts: set[str] = set()

    def make(self, hops: int, label: Label, n: int) -> list[WorldClaim]:
        """``n`` claims of ``hops`` hops and gold ``label``; ValueError when the world
        cannot give that many distinct ones."""
        out: list[WorldClaim] = []
        attempts = 0
        while len(out) < n:
            attempts += 1
            if attempts > 200 * n + 2000:
                raise TooFewClaims(f"the world gives only {len(out)} of {n} distinct {hops}-hop {label.value} claims; "
                                 "use more entities or fewer claims, or another world seed (how many distinct "
                                 f"{hops}-hop chains a world holds varies with its seed)")
            claim = self._one(hops, label)
            if claim is not None:
                out.append(claim)
        return out

    # -- one claim -------------------------------------------------------------------

    def _walk(self, hops: int) -> tuple[list[Hop], Entity, set[str]] | None:
        world, rng = self.world, self.rng
        cur = rng.choice(world.entities)
        visited = {cur.id}
        chain: list[Hop] = []
        for _ in range(hops - 1):
            rels = [a for a in attributes_of(cur.type)
                    if a.is_relation and a.name in cur.facts and cur.facts[a.name] not in visited]
            if not rels:
                return None
            attr = rng.choice(rels)
            chain.append(Hop(cur.id, attr.name, cur.facts[attr.name], cur.sentences[attr.name]))
            cur = world.by_id[cur.facts[attr.name]]
            visited.add(cur.id)
        return chain, cur, visited

    def _one(self, hops: int, label: Label) -> WorldClaim | None:
        walked = self._walk(hops)
        if walked is None:
            return None
        chain, end, visited = walked
        rng = self.rng
        if label is Label.NEI:
            finals = [attribute(end.type, name) for name in end.unstated]
        else:
            finals = [a for a in attributes_of(end.type) if a.name in end.facts
                      and not (a.is_relation and end.facts[a.name] in visited)]
        if not finals:
            return None
        attr = rng.choice(finals)
        true = end.facts.get(attr.name)
        if label is Label.SUPPORT:
            claimed = true
        elif label is Label.REFUTE:
            claimed = self._wrong(attr, true, visited)
        else:
            claimed = self._any(attr, visited)
        if claimed is None:
            return None
        key = (tuple((h.entity, h.attribute) for h in chain), end.id, attr.name, claimed)
        if key in self.seen:
            return None
        text, paraphrased = self._text(chain, end, attr, claimed, stated=label is not Label.NEI)
        if text in self.texts:
            return None
        self.seen.add(key)
        self.texts.add(text)
        final = Hop(end.id, attr.name, true, end.sentences.get(attr.name))
        return WorldClaim(text, label, (*chain, final), claimed, paraphrased)

    def _text(self, chain: list[Hop], end: Entity, attr: Attribute, claimed: Any, *, stated: bool) -> tuple[str, bool | None]:
        rng, world = self.rng, self.world
        subject = world.by_id[chain[0].entity].name if chain else end.name
        for hop in chain:
            rel = attribute(world.by_id[hop.entity].type, hop.attribute)
            subject = rng.choice(rel.descriptions).format(S=subject)
        n = len(attr.statements)
        if not stated:
            wording, paraphrased = rng.randrange(n), None
        else:
            wording = end.wording[attr.name]
            paraphrased = n > 1 and rng.random() < self.paraphrase_rate
            if paraphrased:
                wording = rng.choice([i for i in range(n) if i != wording])
        text = attr.statements[wording].format(S=subject, V=world.render(attr, claimed))
        return _capitalise(text), paraphrased

    # -- values ----------------------------------------------------------------------

    def _wrong(self, attr: Attribute, true: Any, visited: set[str]) -> Any:
        """A plausible value of ``attr`` other than ``true``."""
        rng = self.rng
        if attr.kind == "entity":
            twins = [t for t in self.twins.get(true, []) if t not in visited]
            if twins and rng.random() < 0.5:
                return rng.choice(twins)
            pool = [i for i in self.ids[str(attr.target)] if i != true and i not in visited]
            return rng.choice(pool) if pool else None
        if attr.kind == "category":
            pool = [v for v in self.world.vocab[str(attr.target)] if v != true]
            return rng.choice(pool) if pool else None
        for _ in range(20):
            if attr.kind == "year":
                value = true + rng.choice((-1, 1)) * rng.randint(1, 40)
            else:
                factor = rng.uniform(0.4, 0.8) if rng.random() < 0.5 else rng.uniform(1.25, 2.5)
                value = max(1, round(true * factor / attr.step)) * attr.step
            if value != true and attr.low <= value <= attr.high:
                return value
        return None

    def _any(self, attr: Attribute, visited: set[str]) -> Any:
        """A random value of ``attr`` for an attribute the world leaves unstated."""
        rng = self.rng
        if attr.kind == "entity":
            pool = [i for i in self.ids[str(attr.target)] if i not in visited]
            return rng.choice(pool) if pool else None
        if attr.kind == "category":
            return rng.choice(self.world.vocab[str(attr.target)])
        return rng.randrange(attr.low // attr.step, attr.high // attr.step + 1) * attr.step


def _answer(world: World, hop: Hop) -> dict[str, str]:
    ent = world.by_id[hop.entity]
    attr = attribute(ent.type, hop.attribute)
    if hop.value is None:
        return {"answer": NOT_FOUND, "answer_type": "Unanswerable", "source_url": ""}
    text = world.render(attr, hop.value)
    if attr.answer_unit:
        text = f"{text} {attr.answer_unit}"
    return {"answer": text, "answer_type": "Extractive", "source_url": str(hop.sentence_id)}


def questions(world: World, claim: WorldClaim) -> list[dict[str, Any]]:
    """AVeriTeC-style gold questions, one per hop, each about the entity that hop starts
    from, named ("Who founded X?", then "Where was P born?"), answered from the world;
    an unstated final fact is answered "No answer could be found." (Unanswerable)."""
    out = []
    for hop in claim.hops:
        ent = world.by_id[hop.entity]
        attr = attribute(ent.type, hop.attribute)
        out.append({"question": attr.question.format(S=ent.name), "answers": [_answer(world, hop)]})
    return out


def _justification(world: World, claim: WorldClaim, texts: dict[str, str]) -> str:
    stated = [texts[h.sentence_id] for h in claim.hops if h.sentence_id]
    if claim.label is Label.NEI:
        end = claim.hops[-1]
        stated.append(f"No document states the {end.attribute.replace('_', ' ')} of {world.by_id[end.entity].name}.")
    elif claim.label is Label.REFUTE:
        end = claim.hops[-1]
        attr = attribute(world.by_id[end.entity].type, end.attribute)
        stated.append(f"The claim says {world.render(attr, claim.claimed)} instead.")
    return " ".join(stated)


def claim_row(world: World, claim: WorldClaim, claim_id: str, texts: dict[str, str]) -> dict[str, Any]:
    """The claim as a row of factrl's ``jsonl`` claim format (``texts``: sentence id →
    sentence). ``meta`` holds ``num_hops``, the chain, the claimed value, the AVeriTeC
    questions and justification, the chain's documents and the world's seed."""
    chain_ids = [h.sentence_id for h in claim.hops if h.sentence_id]
    evidence = [] if claim.label is Label.NEI else chain_ids
    end = claim.hops[-1]
    end_attr = attribute(world.by_id[end.entity].type, end.attribute)
    chain = []
    for h in claim.hops:
        attr = attribute(world.by_id[h.entity].type, h.attribute)
        chain.append({"entity": h.entity, "name": world.by_id[h.entity].name, "attribute": h.attribute,
                      "value": None if h.value is None else world.render(attr, h.value), "sentence_id": h.sentence_id})
    meta: dict[str, Any] = {
        "num_hops": len(claim.hops),
        "world_seed": world.seed,
        "chain": chain,
        "claimed_value": world.render(end_attr, claim.claimed),
        "paraphrased": claim.paraphrased,
        "questions": questions(world, claim),
        "justification": _justification(world, claim, texts),
        # The chain's documents: the offline setting shows their sentences (envs.context), so
        # a NOT ENOUGH INFO claim, which has no gold sentence, sees its entities' documents
        # as the others do, and an empty context does not give its label away.
        "cited_doc_ids": list(dict.fromkeys(h.entity for h in claim.hops)),
    }
    if claim.label is Label.NEI:
        meta["chain_evidence"] = chain_ids
    return {"id": claim_id, "claim": claim.text, "label": claim.label.value, "evidence": evidence,
            "evidence_text": {i: texts[i] for i in evidence}, "dataset": "factworld", "meta": meta}
