"""The papers' Wikipedia dumps: FEVER's wiki-pages and HotpotQA's 2017 introductions, read
from fixtures written in the released layouts, with the evidence ids the claims cite."""

import bz2
import json
from pathlib import Path

import pytest

from factrl.corpus import CORPUS_FORMATS, CorpusFormatError, ReadReport, read_corpus
from factrl.corpus.files import corpus_files, corpus_sha256
from factrl.corpus.wikipedia import fever_title

FIXTURES = Path(__file__).parents[1] / "fixtures" / "wikipedia"
FEVER = FIXTURES / "fever-wiki-001.jsonl"
WIKI2017 = FIXTURES / "wiki2017-AA-wiki_00.jsonl"


def fever_dump(tmp_path: Path) -> Path:
    """FEVER's layout: wiki-pages/wiki-001.jsonl, wiki-002.jsonl, …"""
    d = tmp_path / "wiki-pages"
    d.mkdir()
    lines = FEVER.read_text(encoding="utf-8").splitlines(keepends=True)
    (d / "wiki-001.jsonl").write_text("".join(lines[:3]), encoding="utf-8")
    (d / "wiki-002.jsonl").write_text("".join(lines[3:]), encoding="utf-8")
    return d


def hotpot_dump(tmp_path: Path) -> Path:
    """HotpotQA's layout: <dump>/AA/wiki_00.bz2, AA/wiki_01.bz2, AB/…"""
    root = tmp_path / "enwiki-20171001-pages-meta-current-withlinks-abstracts"
    rows = WIKI2017.read_bytes().splitlines(keepends=True)
    for sub, name, part in (("AA", "wiki_00.bz2", rows[:2]), ("AB", "wiki_00.bz2", rows[2:])):
        (root / sub).mkdir(parents=True)
        (root / sub / name).write_bytes(bz2.compress(b"".join(part)))
    return root


def test_formats_registered() -> None:
    assert {"fever_wiki", "fever_wiki_titles", "wiki2017"} <= set(CORPUS_FORMATS.names())


def test_fever_wiki_keeps_released_page_ids_and_line_numbers(tmp_path: Path) -> None:
    report = ReadReport()
    docs = list(read_corpus(fever_dump(tmp_path), "fever_wiki", report=report))
    assert report.rows == 6 and report.blank_rows == 1 and report.documents == 5 and not report.skipped
    soul = docs[0]
    assert soul.id == "Soul_Food_-LRB-film-RRB-" and soul.title == "Soul Food (film)"
    # line 2 is empty: no sentence, and line 3 keeps its number
    assert soul.sentence_ids == ["Soul_Food_-LRB-film-RRB-_sentence_0", "Soul_Food_-LRB-film-RRB-_sentence_1",
                                 "Soul_Food_-LRB-film-RRB-_sentence_3"]
    assert soul.sentences[0].startswith('Soul Food is a 1997 American comedy-drama film produced by Kenneth " Babyface "')
    assert not any("\t" in s or "Babyface (musician)" in s for s in soul.sentences)  # link anchors dropped
    nik = docs[1]
    assert nik.sentences[0] == "Nikolaj William Coster-Waldau ( born 27 July 1970 ) is a Danish actor and producer ."
    assert docs[3].id == "Empty_page" and docs[3].sentences == []
    assert docs[4].title == "Colon : A Title"
    assert report.bytes_read == sum(p.stat().st_size for p in corpus_files(tmp_path / "wiki-pages"))


def test_fever_wiki_titles_gives_veri_r1_ids(tmp_path: Path) -> None:
    docs = list(read_corpus(FEVER, "fever_wiki_titles"))
    assert docs[0].id == "Soul Food (film)"
    assert docs[0].sentence_ids[-1] == "Soul Food (film)_sentence_3"  # Veri-R1's Title_sentence_N
    assert fever_title("Beyonc\u00e9_-LSB-x-RSB-") == "Beyonc\u00e9 [x]"


def test_fever_bad_lines_are_row_errors(tmp_path: Path) -> None:
    p = tmp_path / "wiki-009.jsonl"
    p.write_text(json.dumps({"id": "A", "text": "", "lines": "zero\tNo number ."}) + "\n"
                 + json.dumps({"id": "B", "text": "", "lines": "0\tOne .\n0\tAgain ."}) + "\n"
                 + json.dumps({"id": "C", "text": "x"}) + "\n")
    with pytest.raises(CorpusFormatError, match=r"wiki-009.jsonl:1: .*does not start with a sentence number"):
        list(read_corpus(p, "fever_wiki"))
    report = ReadReport()
    assert list(read_corpus(p, "fever_wiki", on_error="skip", report=report)) == []
    assert [e.reason for e in report.skipped] == [
        "field 'lines' line 0 does not start with a sentence number and a tab: 'zero\\tNo number .'",
        "field 'lines' numbers sentence 0 twice", "missing field 'lines'"]


def test_wiki2017_reads_the_bz2_folder_with_hover_ids(tmp_path: Path) -> None:
    root = hotpot_dump(tmp_path)
    assert [p.relative_to(root).as_posix() for p in corpus_files(root)] == ["AA/wiki_00.bz2", "AB/wiki_00.bz2"]
    report = ReadReport()
    docs = list(read_corpus(root, "wiki2017", report=report))
    assert [d.id for d in docs] == ["Anarchism", "Skagen Painters", "Albedo"]
    assert docs[0].sentence_ids == [f"Anarchism_sentence_{i}" for i in range(3)]
    assert docs[0].sentences[1].startswith("These are often described")  # leading space stripped
    # a blank sentence keeps its place: HoVer's [title, 2] is the third list item
    assert docs[1].sentence_ids == ["Skagen Painters_sentence_0", "Skagen Painters_sentence_2"]
    assert report.bytes_read == sum(p.stat().st_size for p in corpus_files(root))


def test_wiki2017_refuses_the_full_article_dump(tmp_path: Path) -> None:
    p = tmp_path / "wiki_00"
    p.write_text(json.dumps({"id": "1", "title": "X", "text": [["Para one."], ["Para two."]]}) + "\n")
    with pytest.raises(CorpusFormatError, match="full-article dump"):
        list(read_corpus(p, "wiki2017"))


def test_folder_checksum_covers_names_and_contents(tmp_path: Path) -> None:
    d = fever_dump(tmp_path)
    first = corpus_sha256(d)
    assert corpus_sha256(FEVER) != first and len(first) == 64
    (d / "wiki-002.jsonl").rename(d / "wiki-003.jsonl")
    assert corpus_sha256(d) != first


def test_index_over_fever_dump_answers_the_fever_loader_ids(tmp_path: Path) -> None:
    """End to end: a FEVER claim's gold evidence id is a sentence of the index built from
    the dump, and a HoVer claim's supporting fact one of the wiki2017 index."""
    from factrl.datasets import load_dataset
    from factrl.retrieval.index import build_index

    claims = tmp_path / "paper_dev.jsonl"
    claims.write_text(json.dumps({"id": 1, "verifiable": "VERIFIABLE", "label": "SUPPORTS",
                                  "claim": "Soul Food was a box office success.",
                                  "evidence": [[[9, 9, "Soul_Food_-LRB-film-RRB-", 3]]]}) + "\n")
    claim = load_dataset("fever", claims, "dev").claims[0]
    ix = build_index(fever_dump(tmp_path), tmp_path / "ix", corpus_format="fever_wiki", progress=False)
    assert ix.manifest.corpus.blank_rows == 1 and ix.manifest.corpus.n_documents == 5
    assert ix.sentence_text(claim.evidence_ids[0]) == "The film was a box office success ."
    hits = ix.search(["box office success soul food"], 1)[0]
    assert claim.evidence_ids[0] in hits[0].passage.sentence_ids

    hover = tmp_path / "hover_dev_release_v1.1.json"
    hover.write_text(json.dumps([{"uid": "h1", "claim": "Krøyer was a Skagen Painter.", "label": "SUPPORTED",
                                  "num_hops": 2, "supporting_facts": [["Skagen Painters", 2]]}]))
    fact = load_dataset("hover", tmp_path, "dev").claims[0].evidence_ids[0]
    wix = build_index(hotpot_dump(tmp_path), tmp_path / "wix", corpus_format="wiki2017", progress=False)
    assert wix.sentence_text(fact) == "Peder Severin Krøyer was their most celebrated member."


def test_synthetic_wikipedia_generator_writes_both_dumps(tmp_path: Path) -> None:
    """benchmarks/retrieval_scale.py's generator: the same pages in FEVER's, HotpotQA's
    and factrl's layouts, read by the readers with the same sentences."""
    import importlib.util

    path = Path(__file__).parents[2] / "benchmarks" / "retrieval_scale.py"
    spec = importlib.util.spec_from_file_location("retrieval_scale", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for fmt in ("fever", "wiki2017", "jsonl"):
        mod.generate(120, tmp_path / fmt, fmt, n_queries=20, n_vocab=5000, seed=3)
    fever = list(read_corpus(tmp_path / "fever" / "corpus", "fever_wiki"))
    hotpot = list(read_corpus(tmp_path / "wiki2017" / "corpus", "wiki2017"))
    mine = list(read_corpus(tmp_path / "jsonl" / "corpus", "jsonl"))
    assert len(fever) == len(hotpot) == len(mine) == 120
    assert [d.title for d in fever] == [d.title for d in hotpot] == [d.title for d in mine]
    assert [d.sentences for d in fever] == [d.sentences for d in mine]
    assert [[s.rstrip(" .") for s in d.sentences] for d in fever] == [[s.rstrip(".") for s in d.sentences] for d in hotpot]
    assert all(2 <= len(d.sentences) <= 6 for d in fever)
    queries = [json.loads(line) for line in (tmp_path / "fever" / "queries.jsonl").open()]
    assert len(queries) == 20 and all(len(q["text"].split()) == 6 for q in queries)
