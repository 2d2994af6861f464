import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import factrl.cli.index_cmd  # noqa: F401  (registers the commands)
from factrl.cli.app import app
from factrl.cli.index_cmd import parse_params

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"
runner = CliRunner()


def test_build_and_info(tmp_path: Path) -> None:
    out = tmp_path / "ix"
    result = runner.invoke(app, ["index", "build", "--corpus", str(FIXTURE), "--out", str(out), "--unit-sentences", "2", "--param", "k1=1.2"])
    assert result.exit_code == 0, result.output
    assert "20 documents → 40 passages" in result.stdout and "fingerprint bm25-" in result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["params"]["k1"] == 1.2 and manifest["corpus"]["unit_sentences"] == 2

    info = runner.invoke(app, ["index", "info", str(out)])
    assert info.exit_code == 0
    assert json.loads(info.stdout) == manifest


def test_build_errors_are_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(FIXTURE.read_text() + '{"id": "x", "text": 5}\n')
    result = runner.invoke(app, ["index", "build", "--corpus", str(bad), "--out", str(tmp_path / "a")])
    assert result.exit_code == 1
    assert "bad.jsonl:21: field 'text' must be a string" in result.stderr and "--skip-bad-rows" in result.stderr
    assert not (tmp_path / "a").exists()  # nothing half-built left behind

    ok = runner.invoke(app, ["index", "build", "--corpus", str(bad), "--out", str(tmp_path / "b"), "--skip-bad-rows"])
    assert ok.exit_code == 0 and "skipped rows=1" in ok.stdout

    again = runner.invoke(app, ["index", "build", "--corpus", str(bad), "--out", str(tmp_path / "b"), "--skip-bad-rows"])
    assert again.exit_code == 1 and "--overwrite" in again.stderr

    model = runner.invoke(app, ["index", "build", "--corpus", str(FIXTURE), "--out", str(tmp_path / "c"), "--model", "mini"])
    assert model.exit_code == 1 and "bm25 does not take parameter(s) model" in model.stderr

    unknown = runner.invoke(app, ["index", "build", "--corpus", str(FIXTURE), "--out", str(tmp_path / "d"), "--retriever", "magic"])
    assert unknown.exit_code == 1 and "unknown retriever 'magic'" in unknown.stderr

    fmt = runner.invoke(app, ["index", "build", "--corpus", str(FIXTURE), "--out", str(tmp_path / "e"), "--corpus-format", "xml"])
    assert fmt.exit_code == 1 and "unknown corpus format 'xml'" in fmt.stderr

    info = runner.invoke(app, ["index", "info", str(tmp_path)])
    assert info.exit_code == 1 and "manifest.json is missing" in info.stderr


def test_parse_params() -> None:
    assert parse_params(["k1=1.2", "stemmer=none", "title-weight=2", "flag=true", "name=a=b"]) == {
        "k1": 1.2,
        "stemmer": "none",
        "title_weight": 2,
        "flag": True,
        "name": "a=b",
    }
    import typer

    with pytest.raises(typer.BadParameter):
        parse_params(["novalue"])


def test_no_progress_silences_the_build_messages(tmp_path: Path) -> None:
    loud = runner.invoke(app, ["index", "build", "--corpus", str(FIXTURE), "--out", str(tmp_path / "a")])
    quiet = runner.invoke(app, ["index", "build", "--corpus", str(FIXTURE), "--out", str(tmp_path / "b"), "--no-progress"])
    assert loud.exit_code == 0 and quiet.exit_code == 0, quiet.output
    assert "building bm25" in loud.output and "building bm25" not in quiet.output
    assert "Built bm25 index" in quiet.output


def test_build_a_fever_dump_folder_and_resume(tmp_path: Path) -> None:
    dump = tmp_path / "wiki-pages"
    dump.mkdir()
    (dump / "wiki-001.jsonl").write_text((FIXTURE.parent / "wikipedia" / "fever-wiki-001.jsonl").read_text())
    args = ["index", "build", "--corpus", str(dump), "--out", str(tmp_path / "ix"), "--corpus-format", "fever_wiki",
            "--resume", "--no-progress"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "5 documents" in first.stdout
    # the finished index is not rebuilt: --resume does not replace --overwrite
    again = runner.invoke(app, args)
    assert again.exit_code == 1 and "already holds an index" in again.output
    (tmp_path / "ix" / "manifest.json").unlink()  # as if the process had died before its manifest
    resumed = runner.invoke(app, [*args[:-1], "--progress"])
    assert resumed.exit_code == 0, resumed.output
    assert "the passage store is complete" in resumed.output


def test_unknown_kernel_is_one_clear_line(tmp_path: Path) -> None:
    r = runner.invoke(app, ["index", "build", "--corpus", str(FIXTURE), "--out", str(tmp_path / "ix"),
                            "--param", "kernel=fastest", "--no-progress"])
    assert r.exit_code == 1 and "unknown BM25 top-k kernel 'fastest'" in r.output
