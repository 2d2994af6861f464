"""The factworld exact verifier on hand-written statements about a hand-written world."""

import json

import pytest

from factrl.datasets.factworld import FactWorld

from _factworld import HAND_WORLD, write_hand_world


@pytest.fixture(scope="module")
def fw(tmp_path_factory) -> FactWorld:
    return FactWorld.load(write_hand_world(tmp_path_factory.mktemp("hand")))


@pytest.mark.parametrize(("statement", "verdict"), [
    # stated facts, in every paraphrase the documents use
    ("Dara Velkun was born in Korvath.", "supported"),
    ("Dara Velkun is a native of Korvath.", "supported"),
    ("The birthplace of Dara Velkun is Korvath.", "supported"),
    ("Dara Velkun was born in 1901.", "supported"),
    ("Dara Velkun was born in the year 1901", "supported"),  # the full stop is optional
    ("By profession, Dara Velkun was a painter.", "supported"),
    ("Korvath has a population of 245,000.", "supported"),
    ("Korvath is home to 245000 people.", "supported"),  # with or without separators
    ("The river Velkor flows through Korvath.", "supported"),
    ("Velkor empties into the Ostrel Sea.", "supported"),
    ("Velkor is 1,204 kilometres long.", "supported"),
    ("Korvath is the capital of Ostrala.", "supported"),
    ("People in Ostrala pay with the korval.", "supported"),
    ("Korvath is a city.", "supported"),
    # case and spacing do not matter
    ("  dara   VELKUN was BORN in korvath .", "supported"),
    # wrong values: another city (the look-alike), year, number, category, type
    ("Dara Velkun was born in Karvath.", "contradicted"),
    ("Dara Velkun was born in 1902.", "contradicted"),
    ("Korvath has a population of 246,000.", "contradicted"),
    ("Dara Velkun worked as an engineer.", "contradicted"),
    ("Zorbatek is active in mining.", "contradicted"),
    ("Korvath is a river.", "contradicted"),
    ("Velkor flows into the Vandu Sea.", "contradicted"),
    # a capitalised name the world does not know is another value than the world's
    ("Dara Velkun was born in Narnia.", "contradicted"),
    ("Zorbatek was founded by Mira Velkun.", "contradicted"),
    # multi-hop descriptions, resolved through stated relations
    ("The founder of Zorbatek was born in Korvath.", "supported"),
    ("The city where the founder of Zorbatek was born lies on the river Velkor.", "supported"),
    ("The capital of the country of Karvath has a population of 245,000.", "supported"),
    ("The founder of Zorbatek was born in the year 1950.", "contradicted"),
    ("The river on which the headquarters city of Zorbatek lies is 99 kilometres long.", "contradicted"),
    ("Dara Velkun was born in the capital of Ostrala.", "supported"),  # a description as the value
    # attributes the world leaves unstated
    ("Dara Velkun worked for Zorbatek.", "unknown"),
    ("Zorbatek was founded in 1950.", "unknown"),
    ("Karvath is home to 10,000 people.", "unknown"),
    ("The founder of the employer of Mira Velkun worked for Zorbatek.", "unknown"),
    ("The birthplace of Mira Velkun lies on the river Velkor.", "unknown"),  # through an unstated relation
    # not a template, an unknown subject, a value of the wrong type, an unknown category
    ("Dara Velkun painted the rivers of Korvath.", "unknown"),
    ("Tomas Brinn was born in Korvath.", "unknown"),
    ("Dara Velkun was born in Ostrala.", "unknown"),  # a country is not a birthplace
    ("Dara Velkun worked as a juggler.", "unknown"),
    ("dara velkun was born in narnia", "unknown"),  # no capitalised name: cannot tell a place
    ("", "unknown"),
])
def test_hand_written_statements(fw: FactWorld, statement: str, verdict: str) -> None:
    assert fw.check(statement) == verdict, fw.judge(statement)


def test_judgement_says_what_was_read(fw: FactWorld) -> None:
    j = fw.judge("The founder of Zorbatek was born in Karvath.")
    assert (j.verdict, j.entity, j.attribute, j.asserted, j.expected) == \
        ("contradicted", "dara_velkun", "birthplace", "Karvath", "Korvath")
    assert fw.judge("Dara Velkun worked for Zorbatek.").expected is None


def test_check_text_judges_each_sentence(fw: FactWorld) -> None:
    text = "Dara Velkun was born in Korvath. She loved the sea. Dara Velkun was born in 1950."
    assert [j.verdict for j in fw.check_text(text)] == ["supported", "unknown", "contradicted"]


def test_lookup_by_name(fw: FactWorld) -> None:
    assert fw.entity("  dara  velkun ").id == "dara_velkun" and fw.entity("Nobody") is None
    assert fw.facts("Korvath") == {"country": "Ostrala", "river": "Velkor", "founded_year": "1210",
                                   "population": "245,000"}
    assert fw.facts("DARA VELKUN")["occupation"] == "a painter"
    with pytest.raises(KeyError, match="no entity called 'Nobody'"):
        fw.facts("Nobody")


def test_load_errors_are_clear(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no factworld fact table"):
        FactWorld.load(tmp_path)
    (tmp_path / "world.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        FactWorld.load(tmp_path)
    (tmp_path / "world.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a factworld fact table"):
        FactWorld.load(tmp_path / "world.json")
    (tmp_path / "world.json").write_text(json.dumps({**HAND_WORLD, "entities": [{"id": "x"}]}))
    with pytest.raises(ValueError, match="malformed factworld fact table"):
        FactWorld.load(tmp_path)
    with pytest.raises(TypeError, match="a statement is text"):
        FactWorld.load(write_hand_world(tmp_path / "ok")).check(None)  # type: ignore[arg-type]
