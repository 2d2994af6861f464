"""An exact verifier over a generated world: ``FactWorld.load(dir).check(statement)``.

A statement is read with the world's own templates (every paraphrase of every
attribute, :mod:`.schema`), case- and whitespace-insensitively, a trailing full stop
optional. Its subject may be a name or a chain of descriptions ("the birthplace of the
founder of X"); its value a name, a description, a year, a number ("245,000" or
"245000"), a category word (articles ignored) or a type ("a city"). The verdict:

- ``supported``: the world states that fact;
- ``contradicted``: the world states another value for that attribute (attributes are
  single-valued) — also when the value is a capitalised name the world does not know,
  since the world's value is a different one;
- ``unknown``: the statement does not parse, its subject cannot be resolved (a
  description through an unstated relation), or the attribute is one the world leaves
  unstated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from factrl.datasets.factworld.schema import ATTRIBUTES, TYPE_ATTRIBUTE, TYPES, Attribute
from factrl.datasets.factworld.world import Entity, World

__all__ = ["FactWorld", "Judgement", "Verdict"]

Verdict = Literal["supported", "contradicted", "unknown"]
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+|\d+")
_YEAR = re.compile(r"\d{3,4}")
_PROPER = re.compile(r"[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,3}")
_ARTICLES = ("a ", "an ", "the ")
_MAX_DEPTH = 5


class _Unknown(str):
    """A capitalised name the world does not know (a value no world fact has)."""


@dataclass(frozen=True)
class Judgement:
    """The verdict on one statement and what it was read as (``entity`` an id,
    ``asserted`` and ``expected`` rendered values; ``expected`` None when unstated)."""

    verdict: Verdict
    statement: str
    entity: str | None = None
    attribute: str | None = None
    asserted: str | None = None
    expected: str | None = None


def _split(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``"{S} was born in {V}."`` → literal chunks ``("", " was born in ", "")`` and slot
    order ``("S", "V")``, lower-cased, the final full stop dropped."""
    parts = re.split(r"\{([SV])\}", template.rstrip("."))
    return tuple(p.lower() for p in parts[0::2]), tuple(parts[1::2])


def _matches(lits: tuple[str, ...], slots: tuple[str, ...], text: str) -> list[dict[str, tuple[int, int]]]:
    """Every way ``text`` fits the template: slot → (start, end) spans of ``text``."""
    if not (text.startswith(lits[0]) and text.endswith(lits[-1])):
        return []
    start, end = len(lits[0]), len(text) - len(lits[-1])
    if end <= start:
        return []
    if len(slots) == 1:
        return [{slots[0]: (start, end)}]
    out, mid = [], lits[1]
    i = text.find(mid, start + 1)
    while 0 <= i and i + len(mid) < end:
        out.append({slots[0]: (start, i), slots[1]: (i + len(mid), end)})
        i = text.find(mid, i + 1)
    return out


class FactWorld:
    """A world's facts, by name, and the exact checker of template-shaped statements."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._by_name: dict[str, Entity] = {e.name.lower(): e for e in world.entities}
        self._statements = [(a, *_split(t)) for a in (*ATTRIBUTES, TYPE_ATTRIBUTE) for t in a.statements]
        self._descriptions = [(a, *_split(t)) for a in ATTRIBUTES for t in a.descriptions]
        self._vocab = {k: {v.lower(): v for v in vs} for k, vs in world.vocab.items()}

    @classmethod
    def load(cls, path: Path | str) -> FactWorld:
        """From a generated directory (its ``world.json``) or a ``world.json`` file."""
        path = Path(path)
        file = path / "world.json" if path.is_dir() else path
        if not file.is_file():
            raise FileNotFoundError(f"no factworld fact table at {file} (generate one with `factrl data factworld`)")
        try:
            data = json.loads(file.read_text(encoding="utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{file}: not JSON: {exc}") from None
        try:
            return cls(World.from_json(data))
        except ValueError as exc:
            raise ValueError(f"{file}: {exc}") from None

    # -- lookup ------------------------------------------------------------------------

    def entity(self, name: str) -> Entity | None:
        """The entity called ``name`` (case and spacing ignored), or None."""
        return self._by_name.get(" ".join(name.split()).lower())

    def facts(self, name: str) -> dict[str, str]:
        """The stated facts of the entity ``name`` as text (``{"birthplace": "Korvath",
        "birth_year": "1901"}``); KeyError when the world has no such entity."""
        ent = self.entity(name)
        if ent is None:
            raise KeyError(f"the world has no entity called {name!r}")
        return {k: self.world.render(self._attr(ent.type, k), v) for k, v in ent.facts.items()}

    def _attr(self, type_: str, name: str) -> Attribute:
        return next(a for a in ATTRIBUTES if a.owner == type_ and a.name == name)

    # -- reading -----------------------------------------------------------------------

    def _resolve(self, np: str, depth: int = 0) -> set[str]:
        """The entity ids a noun phrase (lower-cased) names: a name, or a description
        whose inner phrase resolves through a stated relation."""
        found: set[str] = set()
        for cand in (np, np[4:] if np.startswith("the ") else None):
            if cand and cand in self._by_name:
                found.add(self._by_name[cand].id)
        if depth >= _MAX_DEPTH:
            return found
        for attr, lits, slots in self._descriptions:
            for spans in _matches(lits, slots, np):
                s, e = spans["S"]
                for eid in self._resolve(np[s:e], depth + 1):
                    ent = self.world.by_id[eid]
                    if ent.type == attr.owner and attr.name in ent.facts:
                        found.add(str(ent.facts[attr.name]))
        return found

    def _value(self, attr: Attribute, low: str, orig: str) -> Any:
        """``attr``'s value read from the value slot, or None when it is not one."""
        if attr.kind == "year":
            return int(low) if _YEAR.fullmatch(low) else None
        if attr.kind == "number":
            return int(low.replace(",", "")) if _NUMBER.fullmatch(low) else None
        bare = next((low[len(a):] for a in _ARTICLES if low.startswith(a)), low)
        if attr.kind == "type":
            return bare if bare in TYPES else None
        if attr.kind == "category":
            return self._vocab.get(str(attr.target), {}).get(bare)
        ids = [i for i in self._resolve(low) if self.world.by_id[i].type == attr.target]
        if len(ids) == 1:
            return ids[0]
        if not ids and not self._resolve(low) and _PROPER.fullmatch(orig):
            return _Unknown(orig)
        return None

    def _readings(self, text: str) -> list[tuple[Entity, Attribute, Any]]:
        low = text.lower()
        orig = text if len(low) == len(text) else low
        out = []
        for attr, lits, slots in self._statements:
            for spans in _matches(lits, slots, low):
                (ss, se), (vs, ve) = spans["S"], spans["V"]
                subjects = self._resolve(low[ss:se])
                if len(subjects) != 1:
                    continue
                ent = self.world.by_id[subjects.pop()]
                if attr is not TYPE_ATTRIBUTE and ent.type != attr.owner:
                    continue
                value = self._value(attr, low[vs:ve], orig[vs:ve])
                if value is not None:
                    out.append((ent, attr, value))
        return out

    def judge(self, statement: str) -> Judgement:
        """The verdict on one statement, with what it was read as."""
        if not isinstance(statement, str):
            raise TypeError(f"a statement is text, not {type(statement).__name__}")
        text = " ".join(statement.split()).rstrip(".!").strip()
        best: Judgement | None = None
        rank = {"supported": 0, "contradicted": 1, "unknown": 2}
        for ent, attr, value in self._readings(text):
            j = self._judge_one(statement, ent, attr, value)
            if best is None or rank[j.verdict] < rank[best.verdict]:
                best = j
        return best or Judgement("unknown", statement)

    def _judge_one(self, statement: str, ent: Entity, attr: Attribute, value: Any) -> Judgement:
        def shown(v: Any) -> str:
            return str(v) if isinstance(v, _Unknown) or attr.kind == "type" else self.world.render(attr, v)

        if attr is TYPE_ATTRIBUTE:
            verdict: Verdict = "supported" if value == ent.type else "contradicted"
            return Judgement(verdict, statement, ent.id, "type", value, ent.type)
        if attr.name not in ent.facts:
            return Judgement("unknown", statement, ent.id, attr.name, shown(value), None)
        true = ent.facts[attr.name]
        verdict = "supported" if not isinstance(value, _Unknown) and value == true else "contradicted"
        return Judgement(verdict, statement, ent.id, attr.name, shown(value), shown(true))

    def check(self, statement: str) -> Verdict:
        """``"supported"``, ``"contradicted"`` or ``"unknown"`` (see the module doc)."""
        return self.judge(statement).verdict

    def check_text(self, text: str) -> list[Judgement]:
        """One judgement per sentence of ``text`` (factrl's sentence splitter)."""
        from factrl.corpus.sentences import split_sentences

        return [self.judge(s) for s in split_sentences(text)]
