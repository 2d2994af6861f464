"""The world itself: entities with typed facts, which facts the corpus leaves unstated,
and one short encyclopedia document per entity.

Everything is drawn from one ``random.Random`` in a fixed order, so a seed and the knobs
define the world exactly. ``World.to_json``/``World.from_json`` are the machine-readable
fact table (``world.json``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from factrl.datasets.factworld.names import NameMaker
from factrl.datasets.factworld.schema import (INDUSTRIES, OCCUPATIONS, TYPE_ATTRIBUTE, TYPES, Attribute,
                                              attribute, attributes_of, render_value)

__all__ = ["Entity", "World", "WORLD_FORMAT", "build_world", "document_sentences", "CONFUSED"]

WORLD_FORMAT = "factworld/1"
# Share of base entities per type (look-alikes are drawn from them).
_SHARES = {"person": 0.4, "city": 0.2, "company": 0.2, "river": 0.1, "country": 0.1}
# A look-alike's document and its original's say so: a name to tell apart, never a fact.
CONFUSED = "{S} is sometimes confused with {T}."


@dataclass
class Entity:
    """One entity. ``facts`` holds the stated facts only (an entity-valued fact holds the
    other entity's id); ``unstated`` names the attributes no sentence states;
    ``sentences`` maps each stated attribute to the id of the sentence stating it and
    ``wording`` to the statement template that sentence uses; ``twin_of`` is the id of
    the entity this one is a look-alike of."""

    id: str
    name: str
    type: str
    facts: dict[str, Any] = field(default_factory=dict)
    unstated: list[str] = field(default_factory=list)
    twin_of: str | None = None
    sentences: dict[str, str] = field(default_factory=dict)
    wording: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "type": self.type, "facts": self.facts,
                "unstated": self.unstated, "twin_of": self.twin_of, "sentences": self.sentences,
                "wording": self.wording}


@dataclass
class World:
    """Entities in a fixed order, the category vocabularies, and the seed that made them."""

    seed: int
    entities: list[Entity]
    vocab: dict[str, list[str]]
    by_id: dict[str, Entity] = field(init=False, repr=False)
    _names: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_id = {e.id: e for e in self.entities}
        if len(self.by_id) != len(self.entities):
            raise ValueError("entity ids repeat")
        self._names = {e.id: e.name for e in self.entities}

    def of_type(self, type_: str) -> list[Entity]:
        return [e for e in self.entities if e.type == type_]

    @property
    def names(self) -> dict[str, str]:
        """Entity id → name."""
        return self._names

    def render(self, attr: Attribute, value: Any) -> str:
        return render_value(attr, value, self.names if attr.kind == "entity" else None)

    def to_json(self) -> dict[str, Any]:
        schema = {t: {a.name: {"kind": a.kind, "target": a.target} for a in attributes_of(t)} for t in TYPES}
        return {"format": WORLD_FORMAT, "seed": self.seed, "schema": schema, "vocab": self.vocab,
                "entities": [e.to_json() for e in self.entities]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> World:
        if not isinstance(data, dict) or data.get("format") != WORLD_FORMAT:
            raise ValueError(f"not a factworld fact table (expected \"format\": \"{WORLD_FORMAT}\")")
        try:
            ents = [Entity(id=e["id"], name=e["name"], type=e["type"], facts=dict(e["facts"]),
                           unstated=list(e["unstated"]), twin_of=e.get("twin_of"),
                           sentences=dict(e.get("sentences") or {}), wording=dict(e.get("wording") or {}))
                    for e in data["entities"]]
            return cls(seed=int(data["seed"]), entities=ents, vocab={k: list(v) for k, v in data["vocab"].items()})
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed factworld fact table: {type(exc).__name__}: {exc}") from None


def _slug(name: str) -> str:
    return name.lower().replace(" ", "_")


def _apportion(total: int, shares: dict[str, float]) -> dict[str, int]:
    """Largest-remainder counts for ``shares`` summing to ``total``."""
    weight = sum(shares.values())
    raw = {k: total * v / weight for k, v in shares.items()}
    out = {k: int(v) for k, v in raw.items()}
    for k in sorted(raw, key=lambda k: (out[k] - raw[k], list(shares).index(k)))[: total - sum(out.values())]:
        out[k] += 1
    return out


def _counts(n: int, twins: int) -> dict[str, int]:
    counts = _apportion(n - twins, _SHARES)
    for t in TYPES:  # every type present; at least as many cities as countries
        counts[t] = max(counts[t], 1)
    # twins included, every country needs a city of its own to be its capital
    counts["city"] = max(counts["city"], 2 * counts["country"])
    counts["person"] -= sum(counts.values()) - (n - twins)  # the total stays n (people give way)
    if counts["person"] < 1:
        raise ValueError(f"{n} entities are too few for every type; use more")
    return counts


def _names(rng: random.Random, maker: NameMaker, counts: dict[str, int]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    people = counts["person"]
    given = [maker.part(2) for _ in range(max(4, people // 3))]
    family = [maker.part(2) for _ in range(max(4, people // 2))]
    seen: set[str] = set()
    out["person"] = []
    while len(out["person"]) < people:
        full = f"{rng.choice(given)} {rng.choice(family)}"
        if full not in seen:
            seen.add(full)
            out["person"].append(full)
    for t in TYPES[1:]:
        out[t] = [maker.part() for _ in range(counts[t])]
    return out


def _twin_name(maker: NameMaker, name: str) -> str:
    given, _, family = name.partition(" ")
    return f"{maker.variant(given)} {family}" if family else maker.variant(name)


def _number(rng: random.Random, attr: Attribute) -> int:
    return rng.randrange(attr.low // attr.step, attr.high // attr.step + 1) * attr.step


def _fresh(rng: random.Random, attr: Attribute, world_ids: dict[str, list[str]], vocab: dict[str, list[str]]) -> Any:
    """A random value of ``attr``'s kind."""
    if attr.kind == "entity":
        return rng.choice(world_ids[str(attr.target)])
    if attr.kind in ("year", "number"):
        return _number(rng, attr)
    return rng.choice(vocab[str(attr.target)])


def _vocab(maker: NameMaker) -> dict[str, list[str]]:
    return {
        "occupation": list(OCCUPATIONS),
        "industry": list(INDUSTRIES),
        "sea": [f"{maker.part(2)} Sea" for _ in range(6)],
        "currency": [maker.part(2).lower() for _ in range(8)],
        "language": [f"{maker.part(2)}ese" for _ in range(8)],
    }


def build_world(seed: int, n_entities: int, *, distractors: float, unstated_rate: float,
                rng: random.Random) -> World:
    """Draw a world of ``n_entities`` entities, ``distractors`` of them look-alikes of
    another (a name one vowel apart, half its values shared), each non-type attribute
    left unstated with probability ``unstated_rate``."""
    maker = NameMaker(rng)
    twins = round(n_entities * distractors)
    counts = _counts(n_entities, twins)
    names = _names(rng, maker, counts)
    ents = [Entity(id=_slug(n), name=n, type=t) for t in TYPES for n in names[t]]
    for orig in sorted(rng.sample(ents, min(twins, len(ents))), key=ents.index):
        name = _twin_name(maker, orig.name)
        ents.append(Entity(id=_slug(name), name=name, type=orig.type, twin_of=orig.id))
    vocab = _vocab(maker)
    ids = {t: [e.id for e in ents if e.type == t] for t in TYPES}
    values = _draw_values(rng, ents, ids, vocab)
    _state(rng, ents, values, unstated_rate)
    world = World(seed=seed, entities=ents, vocab=vocab)
    _write_documents(rng, world)
    return world


def _draw_values(rng: random.Random, ents: list[Entity], ids: dict[str, list[str]],
                 vocab: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Every entity's true value of every attribute (before any is left unstated)."""
    values: dict[str, dict[str, Any]] = {e.id: {} for e in ents}
    for e in ents:
        for attr in attributes_of(e.type):
            values[e.id][attr.name] = _fresh(rng, attr, ids, vocab)
    cities = ids["city"]
    for i, cid in enumerate(cities[: len(ids["country"])]):  # every country has a city
        values[cid]["country"] = ids["country"][i]
    for k in ids["country"]:
        own = [c for c in cities if values[c]["country"] == k]
        values[k]["capital"] = rng.choice(own)
    for e in ents:  # a look-alike shares about half its values (never a capital or its country)
        if e.twin_of is None:
            continue
        for attr in attributes_of(e.type):
            if attr.name not in ("capital", "country") and rng.random() < 0.5:
                values[e.id][attr.name] = values[e.twin_of][attr.name]
    for e in ents:  # founders are born before their companies are founded
        if e.type == "company":
            born = values[values[e.id]["founder"]]["birth_year"]
            values[e.id]["founded_year"] = min(2015, max(1800, born + rng.randint(20, 60)))
    return values


def _state(rng: random.Random, ents: list[Entity], values: dict[str, dict[str, Any]], rate: float) -> None:
    """Leave some attributes unstated. A capital's country stays stated: "the capital of
    K is C" would otherwise tell it."""
    capitals = {values[e.id]["capital"] for e in ents if e.type == "country"}
    for e in ents:
        attrs = attributes_of(e.type)
        hidden = [a.name for a in attrs if rng.random() < rate and not (a.name == "country" and e.id in capitals)]
        if len(hidden) == len(attrs):  # every document states at least one fact
            hidden.remove(rng.choice(hidden))
        e.unstated = hidden
        e.facts = {a.name: values[e.id][a.name] for a in attrs if a.name not in hidden}


def document_sentences(world: World, e: Entity) -> list[str]:
    """``e``'s document, in the order :func:`build_world` wrote it (from ``sentences``)."""
    order = sorted(e.sentences.items(), key=lambda kv: int(kv[1].rpartition("_")[2]))
    out = []
    for attr_name, _ in order:
        out.append(_sentence(world, e, attr_name))
    return out


def _sentence(world: World, e: Entity, attr_name: str) -> str:
    if attr_name == "type":
        return TYPE_ATTRIBUTE.statements[0].format(S=e.name, V=e.type)
    if attr_name == "confused":
        twin = e.twin_of or next(o.id for o in world.entities if o.twin_of == e.id)
        return CONFUSED.format(S=e.name, T=world.by_id[twin].name)
    attr = attribute(e.type, attr_name)
    template = attr.statements[e.wording[attr_name]]
    return template.format(S=e.name, V=world.render(attr, e.facts[attr_name]))


def _write_documents(rng: random.Random, world: World) -> None:
    """Choose each document's sentence order and wordings; ``sentences`` records them.
    The type sentence comes first; ``confused`` is the look-alike sentence."""
    has_twin = {e.twin_of for e in world.entities if e.twin_of}
    for e in world.entities:
        body = list(e.facts)
        if e.twin_of or e.id in has_twin:
            body.append("confused")
        rng.shuffle(body)
        for attr_name in body:
            if attr_name != "confused":
                e.wording[attr_name] = rng.randrange(len(attribute(e.type, attr_name).statements))
        e.sentences = {name: f"{e.id}_sentence_{i}" for i, name in enumerate(["type", *body])}
