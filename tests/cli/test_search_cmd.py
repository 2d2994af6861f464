import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import factrl.cli.search_cmd  # noqa: F401  (registers the command)
from factrl.cli.app import app
from factrl.retrieval.index import build_index

FIXTURES = Path(__file__).parents[1] / "fixtures"
runner = CliRunner()


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("search") / "ix"
    build_index(FIXTURES / "mini_corpus.jsonl", out, progress=False)
    return out


def test_search_writes_one_line_per_query(index_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "hits.jsonl"
    args = ["search", "--index", str(index_dir), "--queries", str(FIXTURES / "mini_queries.jsonl"), "--k", "3", "--out", str(out), "--batch-size", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Searched 4 queries" in result.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2", "q3", "q4"]
    assert rows[0]["hits"][0] == {"passage_id": "lighthouse#0", "doc_id": "lighthouse", "score": rows[0]["hits"][0]["score"]}
    assert rows[1]["hits"][0]["doc_id"] == "vaccine" and rows[2]["hits"][0]["doc_id"] == "coral"
    assert all(len(r["hits"]) <= 3 for r in rows)
    scores = [h["score"] for h in rows[0]["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert rows[3]["hits"] == []  # stopwords only


def test_batch_size_does_not_change_results(index_dir: Path, tmp_path: Path) -> None:
    outs = []
    for bs in ("1", "100"):
        out = tmp_path / f"h{bs}.jsonl"
        r = runner.invoke(app, ["search", "--index", str(index_dir), "--queries", str(FIXTURES / "mini_queries.jsonl"), "--out", str(out), "--batch-size", bs, "--quiet"])
        assert r.exit_code == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"id": "a"}', "'text' must be present"),
        ('{"text": "x"}', "'id' must be present"),
        ("not json", "bad JSON"),
        ('["a", "b"]', "expected a JSON object"),
    ],
)
def test_malformed_query_line(index_dir: Path, tmp_path: Path, line: str, reason: str) -> None:
    q = tmp_path / "q.jsonl"
    q.write_text('{"id": 1, "text": "fine"}\n\n' + line + "\n")
    result = runner.invoke(app, ["search", "--index", str(index_dir), "--queries", str(q), "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 1
    assert f"{q}:3" in result.stderr and reason in result.stderr


def test_missing_index(tmp_path: Path) -> None:
    result = runner.invoke(app, ["search", "--index", str(tmp_path / "none"), "--queries", str(FIXTURES / "mini_queries.jsonl"), "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 1 and "index directory not found" in result.stderr


@pytest.mark.parametrize("extra", [["--kernel", "numpy", "--threads", "2"], ["--kernel", "reference"]])
def test_kernels_and_threads_give_the_same_file(index_dir: Path, tmp_path: Path, extra: list[str]) -> None:
    base = ["search", "--index", str(index_dir), "--queries", str(FIXTURES / "mini_queries.jsonl"), "--quiet"]
    assert runner.invoke(app, [*base, "--out", str(tmp_path / "a.jsonl")]).exit_code == 0
    r = runner.invoke(app, [*base, "--out", str(tmp_path / "b.jsonl"), *extra])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()


def test_bad_kernel_is_an_error(index_dir: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["search", "--index", str(index_dir), "--queries", str(FIXTURES / "mini_queries.jsonl"),
                            "--out", str(tmp_path / "x.jsonl"), "--kernel", "fastest"])
    assert r.exit_code == 1 and "unknown BM25 top-k kernel 'fastest'" in r.output
