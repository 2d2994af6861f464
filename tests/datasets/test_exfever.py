from pathlib import Path

import pytest

from _helpers import FIXTURES, assert_bad_row
from factrl.datasets import DATASETS, load_dataset
from factrl.labels import Label

HEADER = "claim,explanation,label,golden entity,mention,result entity,discard number\n"
GOOD = "A claim.,An explanation.,SUPPORT,\"['A', 'B_(c)']\",['b'],,\n"


def test_fixture_columns_ids_and_hops() -> None:
    a, b, c = load_dataset("exfever", FIXTURES / "exfever", "test").claims
    assert [x.id for x in (a, b, c)] == ["0", "1", "2"]  # no id column: position among data rows
    assert a.label is Label.SUPPORT and a.dataset == "exfever"
    assert a.evidence_ids == ["Giacomo Casanova", "Cardinal (Catholicism)"] and a.evidence[1].doc_id == "Cardinal (Catholicism)"
    assert a.meta == {"num_hops": 2, "explanation": a.meta["explanation"], "mentions": ["cardinals"]}
    assert b.label is Label.REFUTE and b.meta["num_hops"] == 3 and b.text.endswith('inspired by "slapstick".')
    assert "\nSam Raimi" in b.meta["explanation"]  # a quoted field spanning two lines
    assert b.meta["result_entity"] == "['Oz_the_Great_and_Powerful', 'Slapstick']" and b.meta["discard_number"] == "2.0"
    assert c.label is Label.NEI and c.evidence_ids == ["Blue Velvet (film)", "Chris O'Dowd"]
    assert DATASETS.get("exfever").labels == (Label.SUPPORT, Label.REFUTE, Label.NEI)


def test_id_column_is_used_when_present(tmp_path: Path) -> None:
    path = tmp_path / "test.csv"
    path.write_text("id," + HEADER + "exfever_7," + GOOD)
    assert load_dataset("exfever", path, "test").claims[0].id == "exfever_7"


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("A claim.,x,PERHAPS,\"['A']\",[],,\n", "unknown label 'PERHAPS'"),
        ("A claim.,x,SUPPORT,A and B,[],,\n", "column 'golden entity' is not a list literal"),
        ("A claim.,x,SUPPORT,,[],,\n", "column 'golden entity' is empty"),
        (",x,SUPPORT,\"['A']\",[],,\n", "field 'claim' is empty"),
        ("A claim.,x,SUPPORT,\"['A']\",[],,,extra\n", "cells for 7 columns"),
    ],
)
def test_bad_rows_name_the_csv_line(tmp_path: Path, row: str, reason: str) -> None:
    path = tmp_path / "test.csv"
    path.write_text(HEADER + GOOD + row)
    assert_bad_row("exfever", path, 3, reason, good=1)


def test_short_rows_and_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "test.csv"
    path.write_text("\ufeff" + HEADER + GOOD + "Only a claim.\n", encoding="utf-8")
    assert_bad_row("exfever", path, 3, "column 'label' is empty", good=1)
