import json
from pathlib import Path

import pytest

from factrl.datasets import DATASETS, DatasetFormatError, DatasetLoader, load_dataset
from factrl.labels import Label


def write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_generic_rows(tmp_path: Path) -> None:
    p = write(
        tmp_path / "claims.jsonl",
        [
            {"id": 1, "claim": "Paris is in France.", "label": "SUPPORTS", "evidence": ["Paris_sentence_0", "Paris_sentence_0"], "evidence_text": {"Paris_sentence_0": "Paris is the capital of France."}},
            {"id": "b", "claim": "Unknown thing.", "label": "not enough info", "source": "web"},
            {"id": "c", "claim": "No label.", "dataset": "mine", "meta": {"k": 1}},
        ],
    )
    result = load_dataset("jsonl", p, "test")
    a, b, c = result.claims
    assert a.id == "1" and a.label is Label.SUPPORT and a.dataset == "jsonl"
    assert a.evidence_ids == ["Paris_sentence_0"]
    assert a.evidence[0].doc_id == "Paris" and a.evidence[0].text == "Paris is the capital of France."
    assert b.label is Label.NEI and b.meta == {"source": "web"} and b.evidence == []
    assert c.label is None and c.dataset == "mine" and c.meta == {"k": 1}


def test_folder_source_reads_split_file(tmp_path: Path) -> None:
    write(tmp_path / "dev.jsonl", [{"id": 1, "claim": "x"}])
    assert len(load_dataset("jsonl", tmp_path, "dev").claims) == 1
    with pytest.raises(FileNotFoundError, match="train.jsonl"):
        load_dataset("jsonl", tmp_path, "train")


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"id": 1, "claim": ""}, "field 'claim' is empty"),
        ({"id": 1}, "missing field 'claim'"),
        ({"id": None, "claim": "x"}, "field 'id' must be a string or integer"),
        ({"id": 1, "claim": "x", "label": "PERHAPS"}, "unknown label 'PERHAPS'"),
        ({"id": 1, "claim": "x", "label": 3}, "label must be a string"),
        ({"id": 1, "claim": "x", "evidence": "a_sentence_0"}, "'evidence' must be a list"),
        ({"id": 1, "claim": "x", "evidence": ["a"], "evidence_text": {"b": "t"}}, "not listed in 'evidence': b"),
        ({"id": 1, "claim": "x", "meta": []}, "'meta' must be an object"),
        ("[]", "expected a JSON object"),
    ],
)
def test_bad_rows(tmp_path: Path, row: object, reason: str) -> None:
    p = write(tmp_path / "c.jsonl", [row])
    with pytest.raises(DatasetFormatError, match=reason) as info:
        load_dataset("jsonl", p, "x")
    assert f"{p}:1:" in str(info.value)
    skipped = load_dataset("jsonl", p, "x", on_error="skip")
    assert skipped.claims == [] and skipped.errors[0].line == 1


def test_registry_and_protocol() -> None:
    assert {"scifact", "jsonl"} <= set(DATASETS.names())
    for name in DATASETS.names():  # every registered format, lazily imported
        loader = DATASETS.get(name)()
        assert isinstance(loader, DatasetLoader) and loader.name == name
        # prompt sets (rar_prompts) declare themselves unlabelled and use no labels
        assert loader.labels or getattr(loader, "labelled", True) is False
        assert all(isinstance(label, Label) for label in loader.labels)
    with pytest.raises(KeyError, match="unknown dataset 'nope'"):
        DATASETS.get("nope")
