"""The factworld schema: entity types, their typed attributes, and every wording of them.

Each attribute has a value *kind* — ``entity`` (a relation to another entity, of type
``target``), ``year``, ``number`` (written with thousands separators) or ``category`` (a
closed vocabulary named by ``target``) — and four sets of templates:

- ``statements``: paraphrases of one fact, with ``{S}`` (the subject) and ``{V}`` (the
  value). Documents write each stated fact with one of them; claims use the same one or,
  at the paraphrase rate, another. The verifier (:mod:`.verifier`) parses sentences with
  the same templates.
- ``descriptions`` (relations only): noun phrases naming the related entity, which chain
  into multi-hop claims ("the birthplace of the founder of X").
- ``question``: the AVeriTeC-style question one hop answers ("Where was X born?").

The ``type`` pseudo-attribute ("X is a city.") is always stated, never claimed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ATTRIBUTES",
    "Attribute",
    "INDUSTRIES",
    "KINDS",
    "NOT_FOUND",
    "OCCUPATIONS",
    "RAR_PROMPTS",
    "TYPES",
    "TYPE_ATTRIBUTE",
    "attribute",
    "attributes_of",
    "render_value",
]

TYPES: tuple[str, ...] = ("person", "city", "company", "river", "country")
KINDS: tuple[str, ...] = ("entity", "year", "number", "category", "type")

# Closed vocabularies with real words; seas, currencies and languages are invented per
# world (factrl.datasets.factworld.world).
OCCUPATIONS: tuple[str, ...] = (
    "painter", "chemist", "engineer", "poet", "architect", "surgeon", "composer", "astronomer",
    "lawyer", "sculptor", "botanist", "merchant", "cartographer", "weaver",
)
INDUSTRIES: tuple[str, ...] = (
    "shipbuilding", "textiles", "software", "mining", "brewing", "publishing", "banking", "aviation",
    "glassmaking", "insurance", "pharmaceuticals", "railways",
)

NOT_FOUND = "No answer could be found."  # AVeriTeC's answer to an unanswerable question


@dataclass(frozen=True)
class Attribute:
    """One typed attribute of an entity type (see the module docstring)."""

    owner: str
    name: str
    kind: str
    target: str | None
    statements: tuple[str, ...]
    question: str
    descriptions: tuple[str, ...] = ()
    low: int = 0  # year / number range
    high: int = 0
    step: int = 1  # numbers are multiples of step
    article: bool = False  # category values read "a painter", "an engineer"
    answer_unit: str = ""  # "1,204 kilometres"

    @property
    def key(self) -> str:
        return f"{self.owner}.{self.name}"

    @property
    def is_relation(self) -> bool:
        return self.kind == "entity"


def _a(owner: str, name: str, kind: str, target: str | None, statements: tuple[str, ...], question: str,
       **kw: object) -> Attribute:
    return Attribute(owner, name, kind, target, statements, question, **kw)  # type: ignore[arg-type]


_FOUNDED = ("{S} was founded in {V}.", "{S} was established in {V}.", "The founding year of {S} is {V}.")

ATTRIBUTES: tuple[Attribute, ...] = (
    # person
    _a("person", "birth_year", "year", None,
       ("{S} was born in {V}.", "{S} was born in the year {V}.", "The year of birth of {S} is {V}."),
       "In which year was {S} born?", low=1820, high=1985),
    _a("person", "occupation", "category", "occupation",
       ("{S} worked as {V}.", "By profession, {S} was {V}.", "{S} earned a living as {V}."),
       "What was the occupation of {S}?", article=True),
    _a("person", "birthplace", "entity", "city",
       ("{S} was born in {V}.", "{S} is a native of {V}.", "The birthplace of {S} is {V}."),
       "Where was {S} born?", descriptions=("the birthplace of {S}", "the city where {S} was born")),
    _a("person", "employer", "entity", "company",
       ("{S} worked for {V}.", "{S} was employed by {V}.", "The employer of {S} was {V}."),
       "Which company did {S} work for?", descriptions=("the employer of {S}", "the company that employed {S}")),
    # city
    _a("city", "country", "entity", "country",
       ("{S} is a city in {V}.", "{S} lies in {V}.", "{S} belongs to the country of {V}."),
       "In which country is {S}?", descriptions=("the country of {S}", "the country in which {S} lies")),
    _a("city", "river", "entity", "river",
       ("{S} lies on the river {V}.", "The river {V} flows through {S}.", "{S} was built on the banks of the {V}."),
       "Which river flows through {S}?",
       descriptions=("the river that flows through {S}", "the river on which {S} lies")),
    _a("city", "founded_year", "year", None, _FOUNDED, "When was {S} founded?", low=900, high=1850),
    _a("city", "population", "number", None,
       ("{S} has a population of {V}.", "{S} is home to {V} people.", "The population of {S} is {V}."),
       "What is the population of {S}?", low=5_000, high=3_000_000, step=1_000),
    # company
    _a("company", "founder", "entity", "person",
       ("{S} was founded by {V}.", "{V} founded {S}.", "The founder of {S} is {V}."),
       "Who founded {S}?", descriptions=("the founder of {S}", "the person who founded {S}")),
    _a("company", "headquarters", "entity", "city",
       ("{S} is headquartered in {V}.", "{S} has its head office in {V}.", "The headquarters of {S} are in {V}."),
       "Where is {S} headquartered?",
       descriptions=("the city where {S} is headquartered", "the headquarters city of {S}")),
    _a("company", "founded_year", "year", None, _FOUNDED, "When was {S} founded?", low=1800, high=2015),
    _a("company", "industry", "category", "industry",
       ("{S} is active in {V}.", "{S} does business in {V}.", "The industry of {S} is {V}."),
       "In which industry is {S} active?"),
    # river
    _a("river", "length_km", "number", None,
       ("{S} is {V} kilometres long.", "{S} has a length of {V} kilometres.", "The length of {S} is {V} kilometres."),
       "How long is {S}?", low=40, high=4_000, step=1, answer_unit="kilometres"),
    _a("river", "sea", "category", "sea",
       ("{S} flows into the {V}.", "{S} empties into the {V}.", "The mouth of {S} is on the {V}."),
       "Into which sea does {S} flow?"),
    # country
    _a("country", "capital", "entity", "city",
       ("The capital of {S} is {V}.", "{V} is the capital of {S}.", "{S} is governed from {V}."),
       "What is the capital of {S}?", descriptions=("the capital of {S}", "the capital city of {S}")),
    _a("country", "currency", "category", "currency",
       ("{S} uses the {V} as its currency.", "The currency of {S} is the {V}.", "People in {S} pay with the {V}."),
       "What currency does {S} use?"),
    _a("country", "language", "category", "language",
       ("The main language of {S} is {V}.", "People in {S} speak {V}.", "{V} is spoken in {S}."),
       "What language is spoken in {S}?"),
)

# "X is a city." opens every document; checkable, never claimed.
TYPE_ATTRIBUTE = Attribute("*", "type", "type", None, ("{S} is a {V}.",), "What is {S}?")

RAR_PROMPTS: dict[str, str] = {
    "person": "Write a short biography of {S}.",
    "city": "Describe the city of {S}.",
    "company": "Describe the company {S}.",
    "river": "Describe the river {S}.",
    "country": "Describe the country {S}.",
}

_BY_KEY = {a.key: a for a in ATTRIBUTES}


def attribute(owner: str, name: str) -> Attribute:
    """The attribute ``name`` of type ``owner``; KeyError naming the known ones."""
    try:
        return _BY_KEY[f"{owner}.{name}"]
    except KeyError:
        known = ", ".join(a.name for a in attributes_of(owner))
        raise KeyError(f"type {owner!r} has no attribute {name!r} (known: {known})") from None


def attributes_of(owner: str) -> tuple[Attribute, ...]:
    return tuple(a for a in ATTRIBUTES if a.owner == owner)


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def render_value(attr: Attribute, value: int | str, names: dict[str, str] | None = None) -> str:
    """The value as text: an entity's name (``names`` maps ids to names), a year, a number
    with thousands separators, a category word (with its article where the attribute
    takes one)."""
    if attr.kind == "entity":
        if names is None:
            raise ValueError(f"rendering {attr.key} needs the entity names")
        return names[str(value)]
    if attr.kind == "year":
        return str(int(value))
    if attr.kind == "number":
        return f"{int(value):,}"
    return _article(str(value)) if attr.article else str(value)
