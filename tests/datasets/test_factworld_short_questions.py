"""factworld's short-form questions (Binary RAR's answer accuracy): every answerable
question's gold answer is written in the sentence that states its fact, every
unanswerable one asks for an attribute the world leaves unstated, the entities keep
their long-form prompts' split, and the same seed writes the same bytes."""

import json
from pathlib import Path

from factrl.datasets import load_dataset
from factrl.datasets.factworld import WorldConfig, generate, write_world
from factrl.protocol.rar import matches_gold

SPLITS = ("train", "dev", "test")


def _rows(gen, folder):
    return {s: [json.loads(line) for line in gen.files[f"{folder}/{s}.jsonl"].decode().splitlines()] for s in SPLITS}


def test_answerable_questions_are_answered_by_the_sentence_stating_the_fact():
    gen = generate(WorldConfig(seed=11, entities=80, claims=60))
    world = json.loads(gen.files["world.json"])
    entities = {e["name"]: e for e in world["entities"]}
    sentences = {}
    for line in gen.files["corpus.jsonl"].decode().splitlines():
        doc = json.loads(line)
        sentences.update({f"{doc['id']}_sentence_{i}": s for i, s in enumerate(doc["sentences"])})
    short = [q for rows in _rows(gen, "rar_short").values() for q in rows]
    answerable = [q for q in short if q["answerable"]]
    assert len(answerable) == 80  # one per entity
    for q in answerable:
        e = entities[q["entity"]]
        assert q["attribute"] in e["facts"] and q["kind"] == "short" and q["answers"]
        stating = sentences[e["sentences"][q["attribute"]]]
        assert matches_gold(stating, q["answers"]), (q["prompt"], stating, q["answers"])
        assert stating in q["documents"][0]["text"] and q["entity"] in q["prompt"]
    unanswerable = [q for q in short if not q["answerable"]]
    assert len(unanswerable) == sum(bool(e["unstated"]) for e in world["entities"]) > 0
    for q in unanswerable:
        e = entities[q["entity"]]
        assert "answers" not in q and q["attribute"] in e["unstated"]
        assert q["attribute"] not in e["facts"] and q["attribute"] not in e["sentences"]


def test_questions_keep_their_entitys_split_and_the_manifest_counts_them():
    gen = generate(WorldConfig(seed=12, entities=60, claims=60))
    long_form, short = _rows(gen, "rar"), _rows(gen, "rar_short")
    for s in SPLITS:
        assert {q["entity"] for q in short[s]} <= {p["entity"] for p in long_form[s]}
        assert {q["entity"] for q in short[s] if q["answerable"]} == {p["entity"] for p in long_form[s]}
    counts = json.loads(gen.files["manifest.json"])["counts"]["rar_short"]
    assert {s: c["answerable"] + c["unanswerable"] for s, c in counts.items()} == {s: len(short[s]) for s in SPLITS}


def test_the_same_seed_writes_the_same_questions_and_the_loader_reads_them(tmp_path: Path):
    a, b = generate(WorldConfig(seed=13, entities=50, claims=30)), generate(WorldConfig(seed=13, entities=50, claims=30))
    assert all(a.files[f"rar_short/{s}.jsonl"] == b.files[f"rar_short/{s}.jsonl"] for s in SPLITS)
    other = generate(WorldConfig(seed=14, entities=50, claims=30))
    assert a.files["rar_short/train.jsonl"] != other.files["rar_short/train.jsonl"]
    write_world(WorldConfig(seed=13, entities=50, claims=30), tmp_path / "w")
    claims = load_dataset("rar_prompts", tmp_path / "w" / "rar_short", "train").claims
    assert [c.id for c in claims] == [q["id"] for q in _rows(a, "rar_short")["train"]]
    first = next(c for c in claims if c.meta["answerable"])
    assert first.meta["kind"] == "short" and first.meta["answers"] and first.meta["documents"]
