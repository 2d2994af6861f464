from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from factrl.datasets import DATASETS, DatasetFormatError, DatasetLoader, load_dataset  # noqa: E402
from factrl.datasets.veri_r1_parquet import VeriR1ParquetLoader, VerlDataError, read_verl_parquet  # noqa: E402
from factrl.labels import Label  # noqa: E402


def authors_row(i: int, claim_id: str, text: str | None, label: str, evidence: list[str]) -> dict:
    """A row shaped like the Veri-R1 authors' files (no factrl claim in extra_info)."""
    truth = {"evidence": evidence, "label": label}
    return {
        "id": claim_id,
        "question": text,
        "golden_answers": truth,
        "data_source": "feverous",
        "prompt": [{"content": f"...\n\nVerify the claim:\n{text}\n", "role": "user"}],
        "ability": "FEVEROUS",
        "reward_model": {"ground_truth": truth, "style": "rule"},
        "extra_info": {"index": i, "split": "toy"},
    }


ROWS = [
    authors_row(0, "f1", "The tower is granite.", "SUPPORT", ["Tower_sentence_2"]),
    authors_row(1, "f2", "The river is short.", "REFUTE", ["River", "Delta"]),
    authors_row(2, "f1", "The tower is granite.", "SUPPORT", ["Tower_sentence_2"]),  # a repeat, as in their train file
    authors_row(3, "f3", "Nobody knows the bridge.", "NOT ENOUGH INFO", []),
]


def write(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def ids(result) -> list[str]:
    return [c.id for c in result.claims]


def test_reads_authors_rows_and_drops_repeats(tmp_path: Path) -> None:
    write(tmp_path / "toy.parquet", ROWS)
    result = load_dataset("veri_r1_parquet", tmp_path, "toy")
    assert ids(result) == ["f1", "f2", "f3"] and result.duplicates == 1 and result.errors == []
    first = result.claims[0]
    assert first.text == "The tower is granite." and first.label is Label.SUPPORT
    assert first.evidence_ids == ["Tower_sentence_2"] and first.dataset == "feverous"
    assert first.meta == {"ability": "FEVEROUS", "split": "toy", "index": 0}
    assert result.claims[2].label is Label.NEI and result.claims[2].evidence == []
    # The file itself is a source too; without dedupe every row comes back.
    kept = VeriR1ParquetLoader(dedupe=False).load(tmp_path / "toy.parquet", "ignored")
    assert ids(kept) == ["f1", "f2", "f1", "f3"] and kept.duplicates == 0


def test_registry_lookup_and_protocol() -> None:
    assert "veri_r1_parquet" in DATASETS.names()
    loader = DATASETS.get("veri_r1_parquet")()
    assert isinstance(loader, VeriR1ParquetLoader) and isinstance(loader, DatasetLoader)
    assert loader.name == "veri_r1_parquet"


def test_limit_counts_claims_not_rows(tmp_path: Path) -> None:
    write(tmp_path / "toy.parquet", ROWS)
    assert ids(load_dataset("veri_r1_parquet", tmp_path, "toy", limit=2)) == ["f1", "f2"]
    assert ids(load_dataset("veri_r1_parquet", tmp_path, "toy", limit=3)) == ["f1", "f2", "f3"]
    assert ids(load_dataset("veri_r1_parquet", tmp_path, "toy", limit=0)) == []


BAD = [
    ({"reward_model": {"ground_truth": {"evidence": [], "label": "MAYBE"}, "style": "rule"}}, "bad ground truth"),
    ({"reward_model": None}, "no reward_model.ground_truth"),
    ({"question": None, "prompt": [{"content": "no marker", "role": "user"}]}, "no claim text"),
    ({"id": "f1", "question": "Another text under a used id."}, "repeats with a different claim"),
]


@pytest.mark.parametrize("change, reason", BAD)
def test_bad_rows_raise_with_file_and_row(tmp_path: Path, change: dict, reason: str) -> None:
    path = write(tmp_path / "toy.parquet", ROWS[:2] + [{**authors_row(2, "f9", "Fine.", "SUPPORT", []), **change}])
    with pytest.raises(DatasetFormatError, match=rf"toy\.parquet:2: .*{reason}") as info:
        load_dataset("veri_r1_parquet", tmp_path, "toy")
    assert info.value.file == str(path) and info.value.line == 2


def test_bad_rows_are_skipped_and_recorded(tmp_path: Path) -> None:
    rows = [ROWS[0]] + [{**authors_row(i + 1, f"b{i}", "Fine.", "SUPPORT", []), **change}
                        for i, (change, _) in enumerate(BAD)] + [ROWS[1]]
    path = write(tmp_path / "toy.parquet", rows)
    result = load_dataset("veri_r1_parquet", path, "toy", on_error="skip")
    assert ids(result) == ["f1", "f2"]
    assert [(e.file, e.line) for e in result.errors] == [(str(path), i) for i in range(1, 5)]
    assert [reason in e.reason for e, (_, reason) in zip(result.errors, BAD)] == [True] * 4


def test_claim_text_from_the_prompt_when_there_is_no_question_column(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "question"} for r in ROWS[:2]]
    result = load_dataset("veri_r1_parquet", write(tmp_path / "toy.parquet", rows), "toy")
    assert [c.text for c in result.claims] == ["The tower is granite.", "The river is short."]


def test_missing_split_and_foreign_files(tmp_path: Path) -> None:
    write(tmp_path / "toy.parquet", ROWS)
    with pytest.raises(FileNotFoundError, match="split 'train'.*splits there: toy"):
        load_dataset("veri_r1_parquet", tmp_path, "train")
    write(tmp_path / "other.parquet", [{"x": 1}])
    with pytest.raises(VerlDataError, match="not a verl file"):
        load_dataset("veri_r1_parquet", tmp_path, "other")


def test_read_verl_parquet_keeps_every_row_unless_asked(tmp_path: Path) -> None:
    path = write(tmp_path / "toy.parquet", ROWS)
    assert [c.id for c in read_verl_parquet(path)] == ["f1", "f2", "f1", "f3"]
    assert [c.id for c in read_verl_parquet(path, dedupe=True)] == ["f1", "f2", "f3"]
    write(tmp_path / "bad.parquet", [ROWS[0], {**ROWS[1], "reward_model": None}])
    with pytest.raises(VerlDataError, match=r"bad\.parquet row 1: no reward_model"):
        read_verl_parquet(tmp_path / "bad.parquet")


def test_export_module_reexports_the_reader() -> None:
    from factrl.datasets import veri_r1_parquet
    from factrl.train.verl import export

    for name in ("VERL_COLUMNS", "VerlDataError", "claim_from_row", "context_from_row", "read_verl_parquet"):
        assert getattr(export, name) is getattr(veri_r1_parquet, name)


@pytest.mark.data
def test_authors_files_through_the_registry(shared_data: Path) -> None:
    folder = shared_data / "veri_r1"
    if not (folder / "test_online.parquet").is_file():
        pytest.skip(f"{folder / 'test_online.parquet'} not found")
    result = load_dataset("veri_r1_parquet", folder, "test_online")
    assert len(result) == 512 and result.duplicates == 0 and result.errors == []
    assert {c.label for c in result.claims} == {Label.SUPPORT, Label.REFUTE, Label.NEI}
    assert {c.dataset for c in result.claims} == {"exfever", "feverous"}
    first = result.claims[0]
    assert first.id == "exfever_3803" and first.label is Label.REFUTE
    assert first.evidence_ids == ["London", "River Thames", "Tilbury"]
    assert first.text.startswith("London is the largest city in England")
    if (folder / "train_online.parquet").is_file():
        train = load_dataset("veri_r1_parquet", folder, "train_online")
        assert len(train) + train.duplicates == 8192 and train.errors == []
        assert len({c.id for c in train.claims}) == len(train) == 7097
