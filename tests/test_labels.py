"""Label normalisation: every spelling the datasets use maps to one factrl label."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrl.labels import LABEL_ALIASES, Label, UnknownLabelError, normalise_label

S, R, N, C = Label.SUPPORT, Label.REFUTE, Label.NEI, Label.CONFLICTING

# Spellings seen in the datasets' releases (see shared/data/README.md) and in model output.
SPELLINGS: dict[str, Label] = {
    "SUPPORT": S,  # SciFact evidence, Veri-R1 parquet
    "SUPPORTS": S,  # FEVER, Climate-FEVER
    "SUPPORTED": S,  # HoVer
    "supports": S,  # FEVEROUS-S
    "supported": S,  # HARIS sets
    "Supported": S,  # AVeriTeC
    "S": S,
    "REFUTE": R,
    "REFUTES": R,
    "refutes": R,
    "REFUTED": R,
    "Refuted": R,  # AVeriTeC
    "CONTRADICT": R,  # SciFact
    "CONTRADICTS": R,
    "CONTRADICTED": R,
    "NOT_SUPPORTED": R,  # HoVer
    "NOT SUPPORTED": R,
    "unsupported": R,  # HARIS sets
    "R": R,
    "NOT ENOUGH INFO": N,  # FEVER, Veri-R1
    "NOT_ENOUGH_INFO": N,  # Climate-FEVER
    "Not Enough Evidence": N,  # AVeriTeC
    "NOT ENOUGH INFORMATION": N,
    "not-enough-info": N,
    "NotEnoughInfo": N,
    "NEI": N,
    "N": N,
    "Conflicting Evidence/Cherrypicking": C,  # AVeriTeC
    "Conflicting Evidence / Cherrypicking": C,
    "Conflicting Evidence": C,
    "Cherrypicking": C,
    "CONFLICTING": C,
    "DISPUTED": C,  # Climate-FEVER
}


@pytest.mark.parametrize(("raw", "expected"), sorted(SPELLINGS.items()))
def test_known_spelling(raw: str, expected: Label) -> None:
    assert normalise_label(raw) is expected


def test_surrounding_whitespace_and_label_instances() -> None:
    assert normalise_label("  supports\n") is S
    for lab in Label:
        assert normalise_label(lab) is lab
        assert normalise_label(lab.value) is lab  # the canonical spelling round-trips
        assert str(lab) == lab.value


def test_every_alias_key_maps_to_itself() -> None:
    for key, lab in LABEL_ALIASES.items():
        assert normalise_label(key) is lab


@pytest.mark.parametrize("raw", ["MAYBE", "", "   ", "true", "pants-fire", "SUPPORTS REFUTES",
                                 "NOT ENOUGH", "SUPPORT."])
def test_unknown_spelling_raises_a_helpful_error(raw: str) -> None:
    with pytest.raises(UnknownLabelError) as info:
        normalise_label(raw)
    msg = str(info.value)
    assert repr(raw) in msg  # names the offending value
    assert "known spellings" in msg and "SUPPORTS" in msg and "NOT ENOUGH INFO" in msg


@pytest.mark.parametrize("raw", [None, 1, 0.5, b"SUPPORTS", ["SUPPORTS"]])
def test_non_string_raises_unknown_label(raw: object) -> None:
    with pytest.raises(UnknownLabelError, match="must be a string"):
        normalise_label(raw)  # type: ignore[arg-type]


def test_unknown_label_error_is_a_value_error() -> None:
    # so pydantic reports it as a validation error on the record's field
    assert issubclass(UnknownLabelError, ValueError)


_WORDS = re.compile(r"[\s_\-]+")
separators = st.sampled_from([" ", "_", "-", "  ", "__", " _ ", "\t", "-_-"])


@st.composite
def variations(draw: st.DrawFn) -> tuple[str, Label]:
    """A known spelling with random letter case and random separators between its words."""
    raw, lab = draw(st.sampled_from(sorted(SPELLINGS.items())))
    words = [w for w in _WORDS.split(raw) if w]
    cased = ["".join(ch.upper() if draw(st.booleans()) else ch.lower() for ch in w) for w in words]
    text = cased[0]
    for w in cased[1:]:
        text += draw(separators) + w
    pad = draw(st.sampled_from(["", " ", "\n", "  \t"]))
    return pad + text + pad, lab


@given(variations())
def test_case_and_separator_variations_map_the_same(case: tuple[str, Label]) -> None:
    raw, lab = case
    assert normalise_label(raw) is lab


@given(st.one_of(st.text(), st.text(alphabet="SUPORTEFNIAHCD _-/", max_size=30)))
def test_arbitrary_text_maps_or_raises_unknown_label(raw: str) -> None:
    try:
        out = normalise_label(raw)
    except UnknownLabelError:
        return
    assert isinstance(out, Label)


# ---------------------------------------------------------------- real data files

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _json_lines(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _scifact(d: Path) -> Iterator[str]:
    for rec in _json_lines(d / "scifact" / "claims_train.jsonl"):
        for annotations in rec["evidence"].values():
            yield from (a["label"] for a in annotations)


def _climate_fever(d: Path) -> Iterator[str]:
    for rec in _json_lines(d / "climate_fever" / "climate-fever.jsonl"):
        yield rec["claim_label"]
        yield from (e["evidence_label"] for e in rec["evidences"])


def _json_list(*parts: str, key: str = "label"):
    def read(d: Path) -> Iterator[str]:
        yield from (r[key] for r in json.loads(d.joinpath(*parts).read_text(encoding="utf-8")))

    return read


def _fever(d: Path) -> Iterator[str]:
    yield from (r["label"] for r in _json_lines(d / "fever" / "paper_dev.jsonl"))


def _veri_r1(d: Path) -> Iterator[str]:
    pq = pytest.importorskip("pyarrow.parquet")
    files = sorted((d / "veri_r1").glob("*.parquet"))
    assert files, "no Veri-R1 parquet files"
    for f in files:
        table = pq.read_table(f, columns=["reward_model", "golden_answers"])
        for row in table.column("reward_model").to_pylist():
            yield row["ground_truth"]["label"]
        for row in table.column("golden_answers").to_pylist():
            yield row["label"]


# dataset → (reader, the factrl labels its spellings must map onto)
SOURCES = {
    "scifact": (_scifact, {S, R}),
    "feverous_s": (_json_list("feverous_s", "dev.json"), {S, R}),
    "climate_fever": (_climate_fever, {S, R, N, C}),
    "averitec": (_json_list("averitec", "dev.json"), {S, R, N, C}),
    "fever": (_fever, {S, R, N}),
    "hover_sample": (_json_list("samples", "hover_dev_sample.json"), {S, R}),
    "haris_hover": (_json_list("samples", "haris_hover_2hops_sample.json"), {S, R}),
    "haris_ex_fever": (_json_list("samples", "haris_ex_fever_2hops_sample.json"), {S, R}),
    "haris_checkwhy": (_json_list("samples", "haris_checkwhy_sample.json"), {S, R}),
    "veri_r1": (_veri_r1, {S, R, N}),
}


@pytest.mark.data
@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} not present")
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_label_in_the_data_normalises(name: str) -> None:
    read, allowed = SOURCES[name]
    try:
        spellings = set(read(DATA))
    except FileNotFoundError as exc:
        pytest.skip(f"{name}: {exc}")
    assert spellings, f"{name}: no labels read"
    failures = []
    mapped = set()
    for raw in sorted(spellings):
        try:
            mapped.add(normalise_label(raw))
        except UnknownLabelError as exc:
            failures.append(str(exc).split(";")[0])
    assert not failures, f"{name}: {failures}"
    assert mapped <= allowed, f"{name}: {sorted(spellings)} mapped to {mapped}"


def test_grades_normalise_and_map_to_labels() -> None:
    from factrl.labels import GRADE_LABELS, Grade, normalise_grade

    assert normalise_grade("half") is Grade.HALF_TRUE  # RAWFC
    assert normalise_grade("half-true") is Grade.HALF_TRUE
    assert normalise_grade("pants-fire") is normalise_grade("Pants on Fire") is Grade.PANTS_FIRE
    assert normalise_grade("Mostly True") is Grade.MOSTLY_TRUE and normalise_grade("barely_true") is Grade.BARELY_TRUE
    assert {g: GRADE_LABELS[g] for g in Grade} == {
        Grade.TRUE: S, Grade.MOSTLY_TRUE: S, Grade.HALF_TRUE: C,
        Grade.BARELY_TRUE: R, Grade.FALSE: R, Grade.PANTS_FIRE: R,
    }
    with pytest.raises(UnknownLabelError, match="unknown grade 'sort of'"):
        normalise_grade("sort of")
    with pytest.raises(UnknownLabelError, match="grade must be a string"):
        normalise_grade(3)  # type: ignore[arg-type]
