"""The memory-mapped passage store and its id lookups."""

import json
from pathlib import Path

import numpy as np
import pytest

from factrl.retrieval.base import IndexMismatchError
from factrl.retrieval.hashindex import HashIndex, HashIndexWriter, key_hash, key_hashes
from factrl.retrieval.store import OFFSETS, PASSAGES, PassageStore, PassageWriter, line_offsets
from factrl.types import Passage


def passages() -> list[Passage]:
    out = []
    for d, n in (("alpha", 3), ("beta", 1), ("gamma é", 2)):
        for j in range(n):
            sids = [f"{d}_sentence_{2 * j}", f"{d}_sentence_{2 * j + 1}"]
            sents = [f"{d} sentence {2 * j}.", f"{d} sentence {2 * j + 1}."]
            out.append(Passage(id=f"{d}#{j}", doc_id=d, title=d.title(), text=" ".join(sents), sentence_ids=sids,
                               sentences=sents))
    # the same document again later in the corpus (two rows with one id)
    out.append(Passage(id="alpha#9", doc_id="alpha", title="Alpha", text="Late.", sentence_ids=["alpha_late"],
                       sentences=["Late."]))
    return out


@pytest.fixture()
def store(tmp_path: Path) -> PassageStore:
    w = PassageWriter(tmp_path)
    for p in passages():
        w.add(p)
    assert w.close() == 7
    return PassageStore(tmp_path, expect=7)


def test_sequence_access(store: PassageStore) -> None:
    ps = passages()
    assert len(store) == 7 and store[0] == ps[0] and store[-1] == ps[-1] and store[2:4] == ps[2:4]
    assert list(store) == ps and store == ps
    assert [f["id"] for f in store.iter_fields(1, 3)] == ["alpha#1", "alpha#2"]
    with pytest.raises(IndexError):
        store[7]


def test_lookups(store: PassageStore) -> None:
    assert store.get("gamma é#1").text == "gamma é sentence 2. gamma é sentence 3."
    assert store.get("nope") is None
    assert store.sentence_text("beta_sentence_1") == "beta sentence 1."
    assert store.sentence_text("beta_sentence_9") is None
    assert [p.id for p in store.document("alpha")] == ["alpha#0", "alpha#1", "alpha#2", "alpha#9"]
    assert store.document("delta") == []


def test_old_index_without_offsets_or_lookups(store: PassageStore, tmp_path: Path) -> None:
    d = tmp_path / "old"
    d.mkdir()
    # an old file: no offsets, no lookups, a blank line in the middle and none at the end
    lines = (tmp_path / PASSAGES).read_text(encoding="utf-8").splitlines()
    (d / PASSAGES).write_text("\n".join(lines[:2] + ["", "  "] + lines[2:]), encoding="utf-8")
    old = PassageStore(d, expect=7)
    assert list(old) == passages()
    assert old.get("beta#0").doc_id == "beta" and old.sentence_text("alpha_late") == "Late."
    assert [p.id for p in old.document("gamma é")] == ["gamma é#0", "gamma é#1"]


def test_mismatches_are_errors(store: PassageStore, tmp_path: Path) -> None:
    with pytest.raises(IndexMismatchError, match="has 7 passages, manifest says 8"):
        PassageStore(tmp_path, expect=8)
    with (tmp_path / PASSAGES).open("ab") as fh:
        fh.write(b'{"id": "x"}\n')
    with pytest.raises(IndexMismatchError, match="does not match passages.jsonl"):
        PassageStore(tmp_path)
    (tmp_path / OFFSETS).unlink()
    bad = PassageStore(tmp_path)
    with pytest.raises(IndexMismatchError, match="passage 7 is not a passage record"):
        bad[7]
    with pytest.raises(IndexMismatchError, match="passages.jsonl is missing"):
        PassageStore(tmp_path / "absent")


def test_line_offsets_in_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import factrl.retrieval.store as st

    monkeypatch.setattr(st, "_SCAN_CHUNK", 7)  # lines cross step boundaries
    p = tmp_path / "f.jsonl"
    p.write_bytes(b'{"a": 1}\n\n{"bb": 22}\n{"c": 3}')
    offs = line_offsets(p)
    assert offs.tolist() == [0, 10, 21, 29]
    assert [json.loads(p.read_bytes()[a:b]) for a, b in zip(offs[:-1], offs[1:])] == [{"a": 1}, {"bb": 22}, {"c": 3}]


def test_hash_index_collisions_return_every_row(tmp_path: Path) -> None:
    w = HashIndexWriter()
    for i, k in enumerate(["a", "b", "a", "c"]):
        w.add(k, i)
    w.save(tmp_path, "t")
    ix = HashIndex.load(tmp_path, "t")
    assert ix.rows("a") == [0, 2] and ix.rows("c") == [3] and ix.rows("zz") == []
    assert key_hashes(["a", "b"]).tolist() == [key_hash("a"), key_hash("b")]
    import hashlib

    # stable across processes: blake2b, not the salted hash()
    assert key_hash("a") == int.from_bytes(hashlib.blake2b(b"a", digest_size=8).digest(), "little")
    forced = HashIndex(np.array([5, 5, 9], dtype=np.uint64), np.array([1, 2, 3]))
    assert len(forced) == 3


def test_index_loads_lazily_and_reports_a_bad_row_when_reached(tmp_path: Path) -> None:
    from factrl.retrieval.index import build_index, load_index

    fixture = Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"
    ix = build_index(fixture, tmp_path / "ix", unit_sentences=2, progress=False)
    row = ix.search(["harbor lighthouse granite"], 1)[0][0]
    n = ix.passages.get(row.passage.id)
    assert n == row.passage
    # corrupt a passage far from the hit, keeping the byte length: loading does not read it
    path = tmp_path / "ix" / PASSAGES
    data = bytearray(path.read_bytes())
    offs = np.load(tmp_path / "ix" / OFFSETS)
    last = int(offs[-2])
    data[last] = ord("[")
    path.write_bytes(bytes(data))
    again = load_index(tmp_path / "ix")
    assert again.search(["harbor lighthouse granite"], 1)[0][0].passage == row.passage
    with pytest.raises(IndexMismatchError, match=f"passage {len(offs) - 2} is not a passage record"):
        list(again.passages)


def test_split_modules_keep_their_old_import_paths():
    """The passage pass left retrieval.index and the vocabulary left retrieval.bm25_arrays;
    the names code imported from there still resolve to the same objects."""
    from factrl.retrieval import bm25_arrays, bm25_vocab, index, passage_pass

    assert index.STORE_SUMMARY == passage_pass.STORE_SUMMARY == "passages.json"
    for name in ("DictVocab", "MappedVocab", "load_vocab", "write_vocab"):
        assert getattr(bm25_arrays, name) is getattr(bm25_vocab, name) and name in bm25_arrays.__all__
