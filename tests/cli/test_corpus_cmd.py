"""``factrl corpus pool`` end to end: pool a dataset's evidence, index it, and find each
claim's gold evidence ids among the hits."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import factrl.cli.corpus_cmd  # noqa: F401  (registers the commands)
import factrl.cli.index_cmd  # noqa: F401
from factrl.cli.app import app
from factrl.datasets import load_dataset
from factrl.retrieval.index import build_index

DATA = Path(__file__).parents[1] / "fixtures" / "datasets"
runner = CliRunner()


def pool(tmp_path: Path, dataset: str, folder: str, split: str, *extra: str):
    out = tmp_path / "corpus.jsonl"
    result = runner.invoke(app, ["corpus", "pool", "--dataset", dataset, "--data-dir", str(DATA / folder), "--split", split, "--out", str(out), *extra])
    return result, out


@pytest.mark.parametrize(
    ("dataset", "folder", "split"),
    [("climate_fever", "climate_fever", "test"), ("averitec", "averitec", "dev"), ("feverous_s", "feverous_s", "dev"), ("haris", "haris", "hover_2hops")],
)
def test_pooled_corpus_index_cites_gold_ids(tmp_path: Path, dataset: str, folder: str, split: str) -> None:
    result, corpus = pool(tmp_path, dataset, folder, split)
    assert result.exit_code == 0, result.output
    assert "Pooled" in result.stdout and "conflicts=0" in result.stdout

    claims = load_dataset(dataset, DATA / folder, split).claims
    gold = {e.id for c in claims for e in c.evidence}
    index = build_index(corpus, tmp_path / "ix", unit_sentences=1, progress=False)
    cited = {sid for p in index.passages for sid in p.sentence_ids}
    assert cited == gold  # every unit of the index is somebody's gold evidence, and all gold is there

    for claim in claims:
        (hits,) = index.search([claim.text], 3)
        assert hits, claim.id
        hit_ids = {sid for h in hits for sid in h.passage.sentence_ids}
        assert hit_ids <= gold
        assert hit_ids & set(claim.evidence_ids), f"claim {claim.id}: none of its evidence in the top 3"


def test_pooled_corpus_feeds_index_build_unchanged(tmp_path: Path) -> None:
    result, corpus = pool(tmp_path, "climate_fever", "climate_fever", "test")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    gw = next(r for r in rows if r["id"] == "Global warming")
    assert gw["title"] == "Global warming" and gw["sentence_ids"] == ["Global warming:3", "Global warming:14", "Global warming:178"]
    assert gw["text"] == " ".join(gw["sentences"])

    built = runner.invoke(app, ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "ix"), "--no-progress"])
    assert built.exit_code == 0, built.output
    passages = [json.loads(line) for line in (tmp_path / "ix" / "passages.jsonl").read_text().splitlines()]
    gw_units = [p for p in passages if p["doc_id"] == "Global warming"]
    assert [sid for p in gw_units for sid in p["sentence_ids"]] == gw["sentence_ids"]  # 3-sentence units keep the ids


def test_pool_errors_are_one_clear_line(tmp_path: Path) -> None:
    result, out = pool(tmp_path, "fever", "fever", "dev")
    assert result.exit_code == 1 and "no evidence text to pool" in result.stderr and not out.exists()

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"claim": "c", "label": "Supported", "questions": [{"question": "q", "answers": []}]}]))
    bad_run = runner.invoke(app, ["corpus", "pool", "--dataset", "averitec", "--data-dir", str(bad), "--out", str(tmp_path / "c.jsonl")])
    assert bad_run.exit_code == 1 and f"{bad}:1: questions[0].answers is empty" in bad_run.stderr

    ok, out = pool(tmp_path, "averitec", "averitec", "dev")
    again, _ = pool(tmp_path, "averitec", "averitec", "dev")
    assert ok.exit_code == 0 and again.exit_code == 1 and "--overwrite" in again.stderr
    forced, _ = pool(tmp_path, "averitec", "averitec", "dev", "--overwrite")
    assert forced.exit_code == 0

    unknown = runner.invoke(app, ["corpus", "pool", "--dataset", "nope", "--data-dir", str(tmp_path), "--out", str(tmp_path / "n.jsonl")])
    assert unknown.exit_code == 1 and "nope" in unknown.stderr


def test_conflicting_texts_stop_or_are_counted(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "claim": "c one", "label": "true", "documents": [{"id": "d", "text": "x"}]},
        {"id": "b", "claim": "c two", "label": "true", "documents": [{"id": "d", "text": "y"}]},
    ]
    data = tmp_path / "news.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # news ids are claim-scoped, so these do not clash; a jsonl claim file with shared ids does
    shared = tmp_path / "claims.jsonl"
    shared.write_text("".join(json.dumps({"id": i, "claim": "c", "evidence": ["P_sentence_0"], "evidence_text": {"P_sentence_0": t}}) + "\n" for i, t in (("1", "x"), ("2", "y"))))
    stop = runner.invoke(app, ["corpus", "pool", "--dataset", "jsonl", "--data-dir", str(shared), "--out", str(tmp_path / "s.jsonl")])
    assert stop.exit_code == 1 and "evidence id 'P_sentence_0' has another text" in stop.stderr and "--allow-conflicts" in stop.stderr
    kept = runner.invoke(app, ["corpus", "pool", "--dataset", "jsonl", "--data-dir", str(shared), "--out", str(tmp_path / "s.jsonl"), "--allow-conflicts"])
    assert kept.exit_code == 0 and "conflicts=1" in kept.stdout and "conflict: evidence id" in kept.stderr
    news = runner.invoke(app, ["corpus", "pool", "--dataset", "news_graded", "--data-dir", str(data), "--out", str(tmp_path / "n.jsonl")])
    assert news.exit_code == 0 and "2 evidence units" in news.stdout


@pytest.mark.data
def test_real_averitec_pool_indexes_exactly_the_gold_ids(tmp_path: Path, shared_data: Path) -> None:
    source = shared_data / "averitec" / "dev.json"
    out = tmp_path / "corpus.jsonl"
    result = runner.invoke(app, ["corpus", "pool", "--dataset", "averitec", "--data-dir", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Pooled 1287 evidence units from 500 claims into 1287 documents" in result.stdout
    claims = load_dataset("averitec", source, "dev").claims
    index = build_index(out, tmp_path / "ix", unit_sentences=1, progress=False)
    assert {sid for p in index.passages for sid in p.sentence_ids} == {e.id for c in claims for e in c.evidence}
    found = sum(bool({s for h in hits for s in h.passage.sentence_ids} & set(c.evidence_ids))
                for c, hits in zip(claims, index.search([c.text for c in claims], 5)))
    assert found >= 400  # 443 of 500 claims find one of their QA pairs in the top 5 (BM25, default settings)
