"""Verifier pairs: splits by group, the sources' pair kinds, hard negatives within a split."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from factrl.labels import Label
from factrl.verifier.pairs import PAIR_SOURCES, SplitFractions, build_pairs, connected_groups, split_of


def test_split_of_is_seeded_and_follows_fractions():
    f = SplitFractions(held_out=0.2, validation=0.1, seed=0)
    splits = [split_of("src", f"g{i}", f) for i in range(4000)]
    counts = Counter(splits)
    assert abs(counts["held_out"] / 4000 - 0.2) < 0.03 and abs(counts["validation"] / 4000 - 0.1) < 0.03
    assert splits == [split_of("src", f"g{i}", f) for i in range(4000)]  # deterministic
    other = [split_of("src", f"g{i}", SplitFractions(0.2, 0.1, seed=1)) for i in range(4000)]
    assert other != splits  # the seed matters
    # a group's split does not depend on which other groups exist
    assert split_of("src", "g7", f) == splits[7]


def test_split_fractions_are_checked():
    with pytest.raises(ValueError):
        SplitFractions(held_out=0.6, validation=0.5)


def test_connected_groups_join_items_sharing_any_key():
    groups = connected_groups([["a", "b"], ["c"], ["b", "d"], ["d"], [], ["e", "c"]])
    assert groups[0] == groups[2] == groups[3] == "a"
    assert groups[1] == groups[5] == "c"
    assert groups[4] == "#item4"


def _write_scifact(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    corpus = [
        {"doc_id": 1, "title": "T1", "abstract": ["Aspirin lowers fever in adults.", "The trial enrolled adults.",
                                                  "Aspirin dosage was fixed."], "structured": False},
        {"doc_id": 2, "title": "T2", "abstract": ["Vitamin C does not prevent colds.", "Colds were counted weekly."],
         "structured": False},
        {"doc_id": 3, "title": "T3", "abstract": ["Sleep improves memory consolidation.", "Memory was tested."],
         "structured": False},
    ]
    claims = [
        {"id": 10, "claim": "Aspirin lowers fever.", "evidence": {"1": [{"sentences": [0], "label": "SUPPORT"}]},
         "cited_doc_ids": [1]},
        {"id": 11, "claim": "Aspirin raises fever.", "evidence": {"1": [{"sentences": [0, 2], "label": "CONTRADICT"}]},
         "cited_doc_ids": [1]},
        {"id": 12, "claim": "Vitamin C prevents colds.", "evidence": {"2": [{"sentences": [0], "label": "CONTRADICT"}]},
         "cited_doc_ids": [2]},
        {"id": 13, "claim": "Sleep memory effects are large.", "evidence": {}, "cited_doc_ids": [3]},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "claims_train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in claims))
    return folder


def test_scifact_pairs_kinds_groups_and_hard_negatives(tmp_path):
    _write_scifact(tmp_path / "scifact")
    pairs = PAIR_SOURCES.get("scifact").pairs(tmp_path, SplitFractions(held_out=0.0, validation=0.0))
    by = {(p.claim_id, p.kind, p.evidence): p.label for p in pairs}
    assert by[("10", "gold", "Aspirin lowers fever in adults.")] == Label.SUPPORT
    assert by[("11", "gold", "Aspirin lowers fever in adults. Aspirin dosage was fixed.")] == Label.REFUTE
    # a multi-sentence rationale also trains sentence by sentence
    assert by[("11", "gold_sentence", "Aspirin dosage was fixed.")] == Label.REFUTE
    # NOT ENOUGH INFO from the gold abstract's other sentences, never a rationale sentence
    negs = [p for p in pairs if p.kind == "hard_negative"]
    assert negs and all(p.label == Label.NEI for p in negs)
    assert {(p.claim_id, p.evidence) for p in negs} >= {("10", "Aspirin dosage was fixed.")}
    assert ("11", "Aspirin dosage was fixed.") not in {(p.claim_id, p.evidence) for p in negs}
    cited = [p for p in pairs if p.kind == "cited"]
    assert [(p.claim_id, p.label) for p in cited] and all(p.claim_id == "13" and p.label == Label.NEI for p in cited)
    # claims citing the same abstract share a group (and so a split)
    groups = {p.claim_id: p.group for p in pairs}
    assert groups["10"] == groups["11"] != groups["12"]


def test_scifact_held_out_claims_keep_no_single_sentence_pairs(tmp_path):
    _write_scifact(tmp_path / "scifact")
    pairs = PAIR_SOURCES.get("scifact").pairs(tmp_path, SplitFractions(held_out=0.99, validation=0.0))
    assert {p.split for p in pairs} == {"held_out"}
    assert not [p for p in pairs if p.kind == "gold_sentence"]


def test_titled_scifact_sources_put_the_abstract_title_first_and_hold_out_the_same_claims(tmp_path):
    folder = _write_scifact(tmp_path / "scifact")
    with (folder / "corpus.jsonl").open("a") as f:
        f.write(json.dumps({"doc_id": 4, "title": "T4", "abstract": ["Fever in adults was measured daily."],
                            "structured": False}) + "\n")
    fractions = SplitFractions(held_out=0.5, validation=0.0, seed=3)
    plain = build_pairs(tmp_path, ["scifact", "scifact_retrieved"], fractions)
    titled = build_pairs(tmp_path, ["scifact_titled", "scifact_retrieved_titled"], fractions)
    assert len(plain) == len(titled)
    titles = {"1": "T1", "2": "T2", "3": "T3", "4": "T4"}
    for p, t in zip(plain, titled):
        assert t.source == p.source.replace("scifact", "scifact_titled", 1).replace("titled_retrieved",
                                                                                     "retrieved_titled")
        assert (t.claim_id, t.label, t.kind, t.group, t.split) == (p.claim_id, p.label, p.kind, p.group, p.split)
        title, _, rest = t.evidence.partition(": ")
        assert title in titles.values() and rest == p.evidence
    by = {(p.claim_id, p.kind): p.evidence for p in titled}
    assert by[("11", "gold")] == "T1: Aspirin lowers fever in adults. Aspirin dosage was fixed."
    assert by[("13", "cited")].startswith("T3: ")
    # the split is SciFact's: a titled source's held-out claims are the plain source's
    assert {p.claim_id for p in plain if p.split == "held_out"} == {p.claim_id for p in titled if p.split == "held_out"}
    assert {p.split for p in plain} == {"train", "held_out"}


def _write_feverous(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {"id": i, "claim": claim, "label": label, "evidence": evidence, "challenge": "x"}
        for i, (claim, label, evidence) in enumerate([
            ("Paris is the capital of France.", "supports", "Paris\tParis is the capital of [[France]]."),
            ("Berlin is the capital of Spain.", "refutes", "Berlin\tBerlin is the capital of Germany."),
            ("Paris has many museums.", "supports", "Paris\tParis has many museums and galleries."),
            ("Madrid is the capital of Spain.", "supports", "Madrid\tMadrid is the capital of Spain."),
        ])
    ]
    path.write_text(json.dumps(rows))
    return path


def test_feverous_hard_negatives_come_from_other_pages_of_the_same_split(tmp_path):
    _write_feverous(tmp_path / "feverous_s" / "dev.json")
    pairs = PAIR_SOURCES.get("feverous_s").pairs(tmp_path, SplitFractions(held_out=0.0, validation=0.0))
    gold = [p for p in pairs if p.kind == "gold"]
    assert [p.evidence for p in gold][0] == "Paris: Paris is the capital of France."
    negs = [p for p in pairs if p.kind == "hard_negative"]
    assert negs and all(p.label == Label.NEI for p in negs)
    for p in negs:  # never a line of the claim's own page
        own_page = next(g.evidence.split(":")[0] for g in gold if g.claim_id == p.claim_id)
        assert not p.evidence.startswith(own_page + ":")
    # the two Paris claims share a page: one group
    assert len({p.group for p in gold if "Paris" in p.claim}) == 1


def test_feverous_hard_negatives_never_cross_splits(tmp_path):
    _write_feverous(tmp_path / "feverous_s" / "dev.json")
    fractions = SplitFractions(held_out=0.5, validation=0.0, seed=3)
    pairs = PAIR_SOURCES.get("feverous_s").pairs(tmp_path, fractions)
    split_of_text = {p.evidence: p.split for p in pairs if p.kind == "gold"}
    for p in pairs:
        if p.kind == "hard_negative":
            assert split_of_text[p.evidence.replace(": ", ": ", 1)] == p.split


def test_climate_fever_pairs_use_each_sentence_label(tmp_path):
    path = tmp_path / "climate_fever" / "climate-fever.jsonl"
    path.parent.mkdir(parents=True)
    row = {"claim_id": "7", "claim": "CO2 warms the planet.", "claim_label": "DISPUTED", "evidences": [
        {"evidence_id": "Global warming:1", "evidence_label": "SUPPORTS", "article": "Global warming",
         "evidence": "CO2 traps heat.", "votes": []},
        {"evidence_id": "Climate:2", "evidence_label": "REFUTES", "article": "Climate",
         "evidence": "CO2 has no effect.", "votes": []},
        {"evidence_id": "Climate:3", "evidence_label": "NOT_ENOUGH_INFO", "article": "Climate",
         "evidence": "Climate is complex.", "votes": []}]}
    path.write_text(json.dumps(row) + "\n")
    pairs = PAIR_SOURCES.get("climate_fever").pairs(tmp_path, SplitFractions())
    assert [(p.evidence, p.label) for p in pairs] == [
        ("Global warming: CO2 traps heat.", Label.SUPPORT), ("Climate: CO2 has no effect.", Label.REFUTE),
        ("Climate: Climate is complex.", Label.NEI)]


def test_build_pairs_names_a_missing_source(tmp_path):
    with pytest.raises(FileNotFoundError, match="scifact"):
        build_pairs(tmp_path, ["scifact"], SplitFractions())
    assert build_pairs(tmp_path, ["scifact"], SplitFractions(), on_missing="skip") == []


@pytest.mark.data
def test_real_data_splits_are_disjoint_by_claim_and_group(shared_data):
    pairs = build_pairs(shared_data, ["scifact", "climate_fever"], SplitFractions())
    for source in ("scifact", "climate_fever"):
        mine = [p for p in pairs if p.source == source]
        by_claim: dict[str, set[str]] = {}
        by_group: dict[str, set[str]] = {}
        for p in mine:
            by_claim.setdefault(p.claim_id, set()).add(p.split)
            by_group.setdefault(p.group, set()).add(p.split)
        assert all(len(s) == 1 for s in by_claim.values())
        assert all(len(s) == 1 for s in by_group.values())
        held = sum(p.split == "held_out" for p in mine) / len(mine)
        assert 0.1 < held < 0.35
    assert {p.label for p in pairs if p.source == "scifact"} == {Label.SUPPORT, Label.REFUTE, Label.NEI}


def test_negate_claim_rules_in_order():
    from factrl.verifier.negation import negate_claim

    assert negate_claim("Vitamin C does not prevent colds.") == "Vitamin C does prevent colds."
    assert negate_claim("Aspirin lowers fever.") == "Aspirin raises fever."
    assert negate_claim("Higher doses help.") == "Lower doses help."
    assert negate_claim("ALDH1 is associated with poor prognosis.") == "ALDH1 is not associated with poor prognosis."
    assert negate_claim("Patients can recover.") == "Patients cannot recover."
    assert negate_claim("Smoking causes cancer.") is None  # no rule applies: no pair
    assert negate_claim("  ") is None


def test_negated_scifact_pairs_are_training_refutes_of_supported_claims(tmp_path):
    _write_scifact(tmp_path / "scifact")
    pairs = build_pairs(tmp_path, ["scifact", "scifact_negated"], SplitFractions(held_out=0.0, validation=0.0))
    negated = [p for p in pairs if p.source == "scifact_negated"]
    # claim 10 ("Aspirin lowers fever.", SUPPORT) is the only supported claim; REFUTE claims give none
    assert [(p.claim_id, p.claim, p.label, p.kind, p.split) for p in negated] == [
        ("10:negated", "Aspirin raises fever.", Label.REFUTE, "negated", "train")]
    original = next(p for p in pairs if p.source == "scifact" and p.claim_id == "10" and p.kind == "gold")
    assert negated[0].evidence == original.evidence and negated[0].group == original.group
    # nothing from validation or held-out claims: those splits stay SciFact's own
    held = PAIR_SOURCES.get("scifact_negated").pairs(tmp_path, SplitFractions(held_out=0.99, validation=0.0))
    assert held == []


def test_retrieved_scifact_negatives_are_training_nei_from_abstracts_the_claim_does_not_cite(tmp_path):
    folder = _write_scifact(tmp_path / "scifact")
    with (folder / "corpus.jsonl").open("a") as f:  # an abstract no claim cites, on their topics
        f.write(json.dumps({"doc_id": 4, "title": "T4", "abstract": ["Fever in adults was measured daily.",
                            "Vitamin C intake and colds were surveyed.", "Nothing else."], "structured": False}) + "\n")
    pairs = build_pairs(tmp_path, ["scifact", "scifact_retrieved"], SplitFractions(held_out=0.0, validation=0.0))
    got = [p for p in pairs if p.source == "scifact_retrieved"]
    assert got and all(p.label == Label.NEI and p.kind == "retrieved" and p.split == "train" for p in got)
    # claim 12 ("Vitamin C prevents colds.") cites abstract 2 only: its negatives come from elsewhere
    assert [p.evidence for p in got if p.claim_id == "12"][0] == "Vitamin C intake and colds were surveyed."
    # claims 10 and 11 cite abstract 1: no sentence of it is their negative
    abstract1 = {"Aspirin lowers fever in adults.", "The trial enrolled adults.", "Aspirin dosage was fixed."}
    assert not {p.evidence for p in got if p.claim_id in ("10", "11")} & abstract1
    groups = {p.claim_id: p.group for p in pairs if p.source == "scifact"}
    assert all(p.group == groups[p.claim_id] for p in got)
    # nothing from validation or held-out claims
    assert PAIR_SOURCES.get("scifact_retrieved").pairs(tmp_path, SplitFractions(held_out=0.99, validation=0.0)) == []


def test_scifact_sources_share_one_read_of_the_corpus_while_it_is_unchanged(tmp_path, monkeypatch):
    import factrl.verifier.sources as sources

    built, real = [], sources._Ranker
    monkeypatch.setattr(sources, "_Ranker", lambda texts: built.append(len(texts)) or real(texts))
    folder = _write_scifact(tmp_path / "scifact")
    fractions = SplitFractions(held_out=0.0, validation=0.0)
    first = build_pairs(tmp_path, ["scifact", "scifact_retrieved"], fractions)
    assert len(built) == 1  # one BM25 over the corpus's sentences for both sources
    assert build_pairs(tmp_path, ["scifact"], fractions) == [p for p in first if p.source == "scifact"]
    assert len(built) == 1
    with (folder / "corpus.jsonl").open("a") as f:  # a changed corpus is read again
        f.write(json.dumps({"doc_id": 5, "title": "T5", "abstract": ["One more sentence."], "structured": False}) + "\n")
    build_pairs(tmp_path, ["scifact_retrieved"], fractions)
    assert len(built) == 2 and built[1] == built[0] + 1
