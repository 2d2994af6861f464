"""A file that begins with a UTF-8 byte order mark (some editors and Windows tools write
one) reads exactly as the same file without it, in every reader family: dataset files as
JSON lines, JSON arrays and CSV; corpora; evidence pools; single JSON documents (a
factworld world, AVeriTeC gold and predictions); claim-id lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factrl.corpus import read_corpus
from factrl.datasets import load_dataset

from _factworld import write_hand_world

FIXTURES = Path(__file__).parents[1] / "fixtures"
BOM = b"\xef\xbb\xbf"


def with_bom(src: Path, dst: Path) -> Path:
    """A copy of ``src`` (a file or a folder of files) with a BOM before each file's bytes."""
    if src.is_dir():
        dst.mkdir(parents=True)
        for f in src.iterdir():
            with_bom(f, dst / f.name)
    else:
        dst.write_bytes(BOM + src.read_bytes())
    return dst


@pytest.mark.parametrize(("name", "folder", "split"), [
    ("fever", "fever", "dev"),  # JSON lines
    ("climate_fever", "climate_fever", "test"),
    ("news_graded", "news_graded", "test"),
    ("hover", "hover", "dev"),  # one JSON array
    ("feverous_s", "feverous_s", "dev"),
    ("averitec", "averitec", "dev"),
    ("checkwhy", "checkwhy", "dev"),
    ("haris", "haris", "hover_2hops"),
    ("exfever", "exfever", "test"),  # CSV
])
def test_dataset_files(name: str, folder: str, split: str, tmp_path: Path) -> None:
    plain = load_dataset(name, FIXTURES / "datasets" / folder, split)
    marked = load_dataset(name, with_bom(FIXTURES / "datasets" / folder, tmp_path / folder), split)
    assert marked.claims == plain.claims and plain.claims and not marked.errors


def test_corpus_files(tmp_path: Path) -> None:
    for fmt, path in [("jsonl", FIXTURES / "mini_corpus.jsonl"),
                      ("scifact", FIXTURES / "datasets" / "scifact_mini" / "corpus.jsonl")]:
        plain = list(read_corpus(path, fmt))
        assert list(read_corpus(with_bom(path, tmp_path / f"{fmt}.jsonl"), fmt)) == plain and plain


def test_evidence_pools(tmp_path: Path) -> None:
    from factrl.retrieval.pools import EvidencePools

    pools = EvidencePools()
    pools.add("c1", [{"id": "nile", "title": "Nile", "text": "The Nile flows north."}], claim="The Nile flows north.")
    pools.save_jsonl(tmp_path / "pools.jsonl")
    back = EvidencePools.load_jsonl(with_bom(tmp_path / "pools.jsonl", tmp_path / "marked.jsonl"))
    assert "c1" in back and [h.passage.id for h in back.search("c1", ["Nile north"], 1)[0]] == ["nile#0"]


def test_single_json_documents(tmp_path: Path) -> None:
    from factrl.datasets.factworld.verifier import FactWorld
    from factrl.metrics.averitec import load_gold, load_predictions

    world = write_hand_world(tmp_path / "world")
    marked = tmp_path / "marked"
    marked.mkdir()
    with_bom(world / "world.json", marked / "world.json")
    assert FactWorld.load(marked).check("Dara Velkun was born in Korvath.") == "supported"
    gold = [{"claim_id": 0, "claim": "c", "label": "Supported", "questions": [{"question": "q?", "answers": []}]}]
    (tmp_path / "gold.json").write_text(json.dumps(gold), encoding="utf-8")
    (tmp_path / "pred.json").write_text(json.dumps([{"claim_id": 0, "pred_label": "Supported", "evidence": []}]),
                                        encoding="utf-8")
    assert load_gold(with_bom(tmp_path / "gold.json", tmp_path / "gold_bom.json")) == load_gold(tmp_path / "gold.json")
    assert (load_predictions(with_bom(tmp_path / "pred.json", tmp_path / "pred_bom.json"))
            == load_predictions(tmp_path / "pred.json"))


def test_claim_id_lists(tmp_path: Path) -> None:
    from factrl.cli._common import select_claims

    data = FIXTURES / "datasets" / "fever"
    first = load_dataset("fever", data, "dev").claims[0]
    (tmp_path / "ids.txt").write_bytes(BOM + f"{first.id}\n".encode())
    assert select_claims("fever", data, "dev", ids=tmp_path / "ids.txt").claims == [first]
