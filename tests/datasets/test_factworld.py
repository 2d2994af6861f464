"""The factworld generator: determinism, label balance, and gold evidence checked by an
independent reading of the fact table (world.json) and the corpus — a hand-written
keyword lexicon per attribute, not the generator's templates."""

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from factrl.corpus import split_sentences
from factrl.datasets import DataSettings, load_dataset, prepare_splits
from factrl.datasets.factworld import FactWorld, WorldConfig, generate, parse_hops, parse_label_mix, write_world
from factrl.labels import Label

# What a sentence stating each attribute must say, written by hand for these tests.
LEXICON = {
    "birth_year": r"\bborn\b|\bbirth\b",
    "occupation": r"\bworked as\b|\bprofession\b|\bliving as\b",
    "birthplace": r"\bborn\b|\bnative\b|\bbirthplace\b",
    "employer": r"\bworked for\b|\bemployed\b|\bemployer\b",
    "country": r"\bcity in\b|\blies in\b|\bcountry\b",
    "river": r"\briver\b|\bbanks\b",
    "founded_year": r"\bfounded\b|\bestablished\b|\bfounding\b",
    "population": r"\bpopulation\b|\bpeople\b",
    "founder": r"\bfounded\b|\bfounder\b",
    "headquarters": r"\bheadquarter|\bhead office\b",
    "industry": r"\bactive in\b|\bbusiness\b|\bindustry\b",
    "length_km": r"\bkilometres\b|\blength\b",
    "sea": r"\bflows into\b|\bempties\b|\bmouth\b",
    "capital": r"\bcapital\b|\bgoverned\b",
    "currency": r"\bcurrency\b|\bpay\b",
    "language": r"\blanguage\b|\bspeak\b|\bspoken\b",
}
# Value kinds as the schema in world.json declares them; numbers are written 245,000.
NUMBER = re.compile(r"\b\d{1,3}(?:,\d{3})*\b")


class Table:
    """world.json and corpus.jsonl read as plain JSON."""

    def __init__(self, files: dict[str, bytes]) -> None:
        world = json.loads(files["world.json"])
        self.schema = world["schema"]
        self.vocab = world["vocab"]
        self.entities = {e["id"]: e for e in world["entities"]}
        self.sentences: dict[str, str] = {}
        self.docs = [json.loads(line) for line in files["corpus.jsonl"].decode().splitlines()]
        for doc in self.docs:
            for i, s in enumerate(doc["sentences"]):
                self.sentences[f"{doc['id']}_sentence_{i}"] = s

    def kind(self, eid: str, attr: str) -> dict:
        return self.schema[self.entities[eid]["type"]][attr]

    def value_text(self, eid: str, attr: str) -> str:
        value, kind = self.entities[eid]["facts"][attr], self.kind(eid, attr)
        if kind["kind"] == "entity":
            return self.entities[value]["name"]
        if kind["kind"] == "number":
            return f"{value:,}"
        return str(value)

    def mentions(self, text: str, words: str) -> bool:
        if words.lower() not in text.lower():  # the cheap test first
            return False
        return re.search(rf"(?<![\w-]){re.escape(words)}(?![\w-])", text, re.IGNORECASE) is not None

    def any_value_of_kind(self, text: str, eid: str, attr: str) -> bool:
        kind = self.kind(eid, attr)
        if kind["kind"] in ("year", "number"):
            return NUMBER.search(text) is not None
        if kind["kind"] == "category":
            return any(self.mentions(text, v) for v in self.vocab[kind["target"]])
        return any(self.mentions(text, e["name"]) for e in self.entities.values()
                   if e["type"] == kind["target"] and e["id"] != eid)


@pytest.fixture(scope="module")
def gen():
    return generate(WorldConfig(seed=11))


@pytest.fixture(scope="module")
def table(gen) -> Table:
    return Table(gen.files)


def all_rows(gen):
    return [r for rows in gen.claims.values() for r in rows]


def test_same_seed_same_bytes_other_seed_other_world(gen) -> None:
    again = generate(WorldConfig(seed=11))
    assert again.files == gen.files
    other = generate(WorldConfig(seed=12))
    assert other.files["corpus.jsonl"] != gen.files["corpus.jsonl"]
    # the world is defined by the seed and the world knobs: more claims, same world
    more = generate(WorldConfig(seed=11, claims=600, paraphrase_rate=0.0))
    assert more.files["world.json"] == gen.files["world.json"] and more.files["corpus.jsonl"] == gen.files["corpus.jsonl"]


def test_files_are_byte_identical_in_another_process(tmp_path: Path) -> None:
    """Another interpreter with another hash seed writes the same bytes."""
    cfg = dict(seed=4, entities=80, claims=150)
    code = ("import sys; from factrl.datasets.factworld import WorldConfig, write_world; "
            f"write_world(WorldConfig(**{cfg!r}), sys.argv[1])")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "a")], check=True, env=env)
    gen = write_world(WorldConfig(**cfg), tmp_path / "b")
    for rel, data in gen.files.items():
        assert (tmp_path / "a" / rel).read_bytes() == data, rel
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    import hashlib
    assert all(hashlib.sha256((tmp_path / "b" / p).read_bytes()).hexdigest() == h for p, h in manifest["files"].items())


def test_labels_and_hops_are_balanced(gen) -> None:
    rows = all_rows(gen)
    assert len(rows) == 3000
    assert Counter(r["label"] for r in rows) == {"SUPPORT": 1000, "REFUTE": 1000, "NOT ENOUGH INFO": 1000}
    per_cell = Counter((r["label"], r["meta"]["num_hops"]) for r in rows)
    assert set(per_cell.values()) <= {333, 334}
    for split, share in (("train", 0.8), ("dev", 0.1), ("test", 0.1)):
        labels = Counter(r["label"] for r in gen.claims[split])
        assert len(gen.claims[split]) == pytest.approx(3000 * share, abs=3)
        assert max(labels.values()) - min(labels.values()) <= 3, (split, labels)
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids) and len({r["claim"] for r in rows}) == len(rows)


def test_knobs_change_what_they_say() -> None:
    g = generate(WorldConfig(seed=3, entities=200, claims=400, hops=parse_hops("1:1,3:3"),
                             label_mix=parse_label_mix("support:2,refute:1,nei:1"), paraphrase_rate=0.0,
                             distractors=0.0))
    rows = all_rows(g)
    assert Counter(r["label"] for r in rows) == {"SUPPORT": 200, "REFUTE": 100, "NOT ENOUGH INFO": 100}
    assert Counter(r["meta"]["num_hops"] for r in rows) == {1: 100, 3: 300}
    assert not g.world.entities[0].twin_of and all(e.twin_of is None for e in g.world.entities)
    # no paraphrase: a one-hop SUPPORT claim is its document sentence, word for word
    texts = Table(g.files).sentences
    one_hop = [r for r in rows if r["label"] == "SUPPORT" and r["meta"]["num_hops"] == 1]
    assert one_hop and all(r["claim"] == texts[r["evidence"][0]] for r in one_hop)
    assert all(r["meta"]["paraphrased"] is False for r in rows if r["label"] != "NOT ENOUGH INFO")
    full = generate(WorldConfig(seed=3, entities=200, claims=400, paraphrase_rate=1.0))
    assert all(r["claim"] != Table(full.files).sentences[r["evidence"][0]]
               for r in all_rows(full) if r["label"] == "SUPPORT" and r["meta"]["num_hops"] == 1)
    assert sum(e.twin_of is not None for e in full.world.entities) == 40  # distractors 0.2 of 200
    for n, d in ((20, 0.5), (21, 0.2), (37, 0.0)):  # exactly the entities asked for, every type present
        world = generate(WorldConfig(seed=1, entities=n, claims=10, distractors=d)).world
        assert len(world.entities) == n and all(world.of_type(t) for t in ("person", "city", "company", "river", "country"))


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(entities=5), "entities must be 20"),
    (dict(hops={4: 1.0}), "hop counts 1 to 3"),
    (dict(label_mix={Label.SUPPORT: 0.0}), "label_mix"),
    (dict(distractors=0.9), "distractors must be in"),
    (dict(unstated_rate=0.0), "unstated_rate must be > 0"),
    (dict(splits=(0.5, 0.1, 0.1)), "splits must be"),
    (dict(seed=-1), "seed must be"),
])
def test_bad_knobs_are_clear_errors(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        WorldConfig(**kwargs)


@pytest.mark.parametrize(("text", "message"), [("1,5", "hop counts are 1 to 3"), ("a:1", "hop counts"),
                                               ("1:-1", "not a number >= 0"), ("", "empty mix")])
def test_bad_hops_text(text, message) -> None:
    with pytest.raises(ValueError, match=message):
        parse_hops(text)


def test_bad_label_mix_text() -> None:
    assert parse_label_mix("1,0,1")[Label.REFUTE] == 0.0
    with pytest.raises(ValueError, match="not 'conflicting'"):
        parse_label_mix("support:1,conflicting:1")
    with pytest.raises(ValueError, match="weights sum to 0"):
        parse_label_mix("0,0,0")


def test_a_world_too_small_for_the_claims_says_so() -> None:
    with pytest.raises(ValueError, match="distinct .* claims; use more entities or fewer claims, or another world seed"):
        generate(WorldConfig(seed=0, entities=20, claims=5000))


# 3-hop claims from 60 entities: seed 106 holds 207 distinct SUPPORT chains of the 250 asked for, 107 enough
NARROW = dict(entities=60, claims=750, hops=parse_hops("3"), distractors=0.0, paraphrase_rate=0.0)


def test_a_refused_seed_names_the_next_one_these_settings_accept() -> None:
    from dataclasses import replace

    from factrl.datasets.factworld.claims import TooFewClaims
    from factrl.datasets.factworld.generator import accepted_seed, refused_seed_message

    cfg = WorldConfig(seed=106, **NARROW)
    with pytest.raises(TooFewClaims, match="only 207 of 250 distinct 3-hop SUPPORT claims") as info:
        generate(cfg)
    assert accepted_seed(cfg) == 107
    assert generate(replace(cfg, seed=107)).claims["train"]  # the named seed is accepted
    assert refused_seed_message(info.value, cfg, "--seed ").endswith(
        "; the first seed after 106 these settings accept is 107 (--seed 107)")
    # a world that can never hold the claims: no seed within the tries
    tiny = WorldConfig(seed=0, entities=20, claims=5000)
    assert accepted_seed(tiny, tries=2) is None


def test_documents_one_per_entity_with_stable_sentences(gen, table: Table) -> None:
    assert [d["id"] for d in table.docs] == list(table.entities)
    for doc in table.docs:
        ent = table.entities[doc["id"]]
        assert doc["title"] == ent["name"]
        assert split_sentences(doc["text"]) == doc["sentences"]  # the text splits back into the same ids
        assert doc["sentences"][0] == f"{ent['name']} is a {ent['type']}."
        assert ent["sentences"]["type"] == f"{doc['id']}_sentence_0"
    # world.json alone rebuilds the corpus
    from factrl.datasets.factworld import World
    from factrl.datasets.factworld.world import document_sentences

    world = World.from_json(json.loads(gen.files["world.json"]))
    assert [document_sentences(world, e) for e in world.entities] == [d["sentences"] for d in table.docs]


def test_names_are_single_stems_and_unique(table: Table) -> None:
    import Stemmer

    stem = Stemmer.Stemmer("english").stemWord
    names = [e["name"] for e in table.entities.values()]
    assert len({n.lower() for n in names}) == len(names)
    single = [n for n, e in zip(names, table.entities.values()) if e["type"] != "person"]
    parts = {p.lower() for n in names for p in n.split()}
    assert all(stem(p) == p for p in parts)  # BM25's stemmer leaves every name part whole
    assert len({n.lower() for n in single} & {p.lower() for n in names if " " in n for p in n.split()}) == 0


def test_support_and_refute_gold_sentences_state_or_contradict_the_claim(gen, table: Table) -> None:
    checked = Counter()
    for row in all_rows(gen):
        if row["label"] == "NOT ENOUGH INFO":
            continue
        chain, text = row["meta"]["chain"], row["claim"]
        assert len(chain) == row["meta"]["num_hops"] and len(row["evidence"]) == len(chain)
        assert table.mentions(text, table.entities[chain[0]["entity"]]["name"]), text
        for i, (hop, sid) in enumerate(zip(chain, row["evidence"])):
            eid, attr = hop["entity"], hop["attribute"]
            assert attr in table.entities[eid]["facts"], (row["id"], hop)  # stated in the world
            if i + 1 < len(chain):  # the chain follows the world's relations
                assert table.entities[eid]["facts"][attr] == chain[i + 1]["entity"]
            sentence = table.sentences[sid]  # the gold id is in the corpus
            assert row["evidence_text"][sid] == sentence
            assert table.mentions(sentence, table.entities[eid]["name"]), (sid, sentence)
            assert table.mentions(sentence, table.value_text(eid, attr)), (sid, sentence)
            assert re.search(LEXICON[attr], sentence, re.IGNORECASE), (attr, sentence)
            assert re.search(LEXICON[attr], text, re.IGNORECASE), (attr, text)  # the claim speaks of it too
        end = chain[-1]
        true = table.value_text(end["entity"], end["attribute"])
        claimed = row["meta"]["claimed_value"]
        assert table.mentions(text, claimed.removeprefix("a ").removeprefix("an ")), (claimed, text)
        if row["label"] == "SUPPORT":
            assert table.mentions(text, true), (true, text)
        else:  # the last gold sentence states a value the claim does not
            assert not table.mentions(text, true) and claimed.split()[-1] != true, (true, text)
        checked[row["label"]] += 1
    assert checked == {"SUPPORT": 1000, "REFUTE": 1000}


def test_no_nei_claim_is_answerable_from_the_corpus(gen, table: Table) -> None:
    capitals = {e["facts"]["capital"] for e in table.entities.values() if "capital" in e["facts"]}
    n = 0
    for row in all_rows(gen):
        if row["label"] != "NOT ENOUGH INFO":
            continue
        assert row["evidence"] == []
        end = row["meta"]["chain"][-1]
        eid, attr = end["entity"], end["attribute"]
        ent = table.entities[eid]
        assert attr not in ent["facts"] and attr in ent["unstated"] and end["value"] is None
        for sid in row["meta"]["chain_evidence"]:  # the hops before the last are stated
            assert sid in table.sentences
        for sid, sentence in table.sentences.items():
            if table.mentions(sentence, ent["name"]) and re.search(LEXICON[attr], sentence, re.IGNORECASE):
                assert not table.any_value_of_kind(sentence, eid, attr), (row["claim"], sentence)
        if attr == "country":  # "the capital of K is C" would tell C's country
            assert eid not in capitals
        n += 1
    assert n == 1000


def test_questions_one_per_hop_answered_from_the_world(gen, table: Table) -> None:
    for row in all_rows(gen)[:600]:
        qs, chain = row["meta"]["questions"], row["meta"]["chain"]
        assert len(qs) == len(chain)
        for q, hop in zip(qs, chain):
            assert table.entities[hop["entity"]]["name"] in q["question"] and q["question"].endswith("?")
            (answer,) = q["answers"]
            if hop["value"] is None:
                assert answer == {"answer": "No answer could be found.", "answer_type": "Unanswerable", "source_url": ""}
            else:
                assert answer["answer"].startswith(hop["value"]) and answer["source_url"] == hop["sentence_id"]


def test_the_exact_verifier_agrees_with_every_gold_label(gen) -> None:
    fw = FactWorld(gen.world)
    expected = {"SUPPORT": "supported", "REFUTE": "contradicted", "NOT ENOUGH INFO": "unknown"}
    assert all(fw.check(r["claim"]) == expected[r["label"]] for r in all_rows(gen))
    assert all(fw.check(s) == "supported" for s in Table(gen.files).sentences.values() if "confused" not in s)


def test_loaders_read_the_directory(tmp_path: Path) -> None:
    gen = write_world(WorldConfig(seed=5, entities=100, claims=300), tmp_path / "w")
    d = tmp_path / "w"
    for split in ("train", "dev", "test"):
        claims = load_dataset("factworld", d, split).claims
        rows = gen.claims[split]
        assert [c.id for c in claims] == [r["id"] for r in rows]
        assert [c.label.value for c in claims] == [r["label"] for r in rows]
        assert [c.evidence_ids for c in claims] == [r["evidence"] for r in rows]
        assert all(c.dataset == "factworld" and c.meta["num_hops"] == r["meta"]["num_hops"] for c, r in zip(claims, rows))
        # the same claims through the generic jsonl format and the AVeriTeC copies
        assert load_dataset("jsonl", d / "claims", split).claims == claims
        averitec = load_dataset("averitec", d / "averitec", split).claims
        assert [(a.id, a.label, a.meta["questions"]) for a in averitec] == \
            [(c.id, c.label, c.meta["questions"]) for c in claims]
    from factrl.metrics.averitec_submission import gold_questions, has_averitec_gold

    claim = load_dataset("factworld", d, "dev").claims[0]
    assert has_averitec_gold(claim) and len(gold_questions(claim)) == claim.meta["num_hops"]
    prompts = load_dataset("rar_prompts", d / "rar", "train").claims
    assert len(prompts) == 80 and all(p.meta["documents"][0]["title"] == p.meta["entity"] for p in prompts)
    assert sum(len(load_dataset("rar_prompts", d / "rar", s).claims) for s in ("train", "dev", "test")) == 100
    train, held_out = prepare_splits(DataSettings(dataset="factworld", data_dir=str(d)), tmp_path / "run")
    assert len(train) + len(held_out) == len(gen.claims["train"])


def test_loader_refuses_what_is_not_a_factworld_claim(tmp_path: Path) -> None:
    from factrl.datasets import DatasetFormatError

    with pytest.raises(FileNotFoundError, match="claims/train.jsonl"):
        load_dataset("factworld", tmp_path, "train")
    bad = tmp_path / "c.jsonl"
    bad.write_text(json.dumps({"id": "a", "claim": "x", "label": "SUPPORT", "meta": {"num_hops": 1}}) + "\n")
    with pytest.raises(DatasetFormatError, match=r"c.jsonl:1: meta.questions must list"):
        load_dataset("factworld", bad, "x")
    bad.write_text(json.dumps({"id": "a", "claim": "x", "label": "CONFLICTING", "meta": {}}) + "\n")
    assert "SUPPORT, REFUTE or NOT ENOUGH INFO" in load_dataset("factworld", bad, "x", on_error="skip").errors[0].reason


def test_write_refuses_to_overwrite(tmp_path: Path) -> None:
    cfg = WorldConfig(seed=1, entities=40, claims=30)
    write_world(cfg, tmp_path)
    with pytest.raises(FileExistsError, match="overwrite"):
        write_world(cfg, tmp_path)
    write_world(cfg, tmp_path, overwrite=True)


def test_every_claim_cites_its_chains_documents_so_offline_context_is_never_empty(tmp_path: Path) -> None:
    from factrl.envs.context import document_context
    from factrl.types import Passage

    write_world(WorldConfig(seed=9, entities=60, claims=150), tmp_path / "w")
    docs = [json.loads(line) for line in (tmp_path / "w" / "corpus.jsonl").read_text().splitlines()]
    ids = {d["id"] for d in docs}
    passages = [Passage(id=d["id"], doc_id=d["id"], title=d["title"], text=d["text"], sentences=d["sentences"],
                        sentence_ids=[f"{d['id']}_sentence_{i}" for i in range(len(d["sentences"]))]) for d in docs]
    provide = document_context(passages, max_sentences=None)
    claims = load_dataset("factworld", tmp_path / "w", "train").claims
    assert {c.label for c in claims} == {Label.SUPPORT, Label.REFUTE, Label.NEI}
    for c in claims:
        cited = c.meta["cited_doc_ids"]
        assert cited == list(dict.fromkeys(step["entity"] for step in c.meta["chain"])) and set(cited) <= ids
        context = {e.id for e in provide(c)}
        assert context and set(c.evidence_ids) <= context  # NEI claims too: never an empty context
