import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrl.corpus import split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Mr. Smith met Dr. Jones. They talked.", ["Mr. Smith met Dr. Jones.", "They talked."]),
        ("Use tools, e.g. Hammers. Also i.e. Nails.", ["Use tools, e.g. Hammers.", "Also i.e. Nails."]),
        ("Apples vs. Oranges etc. Are fruit.", ["Apples vs. Oranges etc. Are fruit."]),
        ("He lives in the U.S. Army base. Fine.", ["He lives in the U.S. Army base.", "Fine."]),
        ("See Fig. 2 and No. 7. Then stop.", ["See Fig. 2 and No. 7.", "Then stop."]),
        ("Smith et al. Reported it. Yes.", ["Smith et al. Reported it.", "Yes."]),
        ("Pi is 3.14 roughly. Next.", ["Pi is 3.14 roughly.", "Next."]),
        ("p < 0.05. 12 patients died.", ["p < 0.05.", "12 patients died."]),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("It ended (finally.) Next one.", ["It ended (finally.)", "Next one."]),
        ('Done. "Quoted start" here.', ["Done.", '"Quoted start" here.']),
        ("lower. case does not split.", ["lower. case does not split."]),
        ("Über alles. Élan vital. étude here.", ["Über alles.", "Élan vital. étude here."]),
        ("Version 2.0.1 is out.Next has no space.", ["Version 2.0.1 is out.Next has no space."]),
        ("Wait... What?! Really.", ["Wait...", "What?!", "Really."]),
        ("Line one.\nLine two.\n\n  Line three.  ", ["Line one.", "Line two.", "Line three."]),
        ("(Dr. Who) was here. Ok", ["(Dr. Who) was here.", "Ok"]),
        ("It was a clear no. Then rain.", ["It was a clear no.", "Then rain."]),
        ("", []),
        ("   \n\t ", []),
        ("no terminal punctuation at all", ["no terminal punctuation at all"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_split_keeps_all_non_space_characters() -> None:
    text = "A b. C d! E f? 1 g. \"H\" i. J"
    joined = "".join(split_sentences(text))
    assert joined.replace(" ", "") == text.replace(" ", "")

_ALPHABET = st.sampled_from(list("abcXYZ019 .!?\"'()\n") + ["Mr.", "e.g.", "U.S.", " et al.", "3.5"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_split_is_lossless_and_stable(text: str) -> None:
    sentences = split_sentences(text)
    # No non-space character is lost or invented, and no sentence is blank or padded.
    assert "".join(sentences).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")
    assert all(s and s == s.strip() for s in sentences)
    # Splitting a sentence again never splits it further.
    assert all(split_sentences(s) == [s] for s in sentences)
