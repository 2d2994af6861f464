"""``factrl train verifier`` → ``factrl export verifier`` → ``verify``/``eval --agent
retrieve_verify``, end to end on a tiny random encoder and a small Climate-FEVER-shaped file."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _support import REPO
from factrl.cli import _load_commands, app

pytest.importorskip("torch")
_load_commands()
runner = CliRunner()


def _climate(folder):
    path = folder / "climate_fever" / "climate-fever.jsonl"
    path.parent.mkdir(parents=True)
    rows = []
    for i in range(30):
        rows.append({"claim_id": str(i), "claim": f"Glaciers retreat number {i}.", "claim_label": "SUPPORTS",
                     "evidences": [
                         {"evidence_id": f"Glacier:{i}", "evidence_label": "SUPPORTS", "article": "Glacier",
                          "evidence": f"Glaciers have retreated {i}.", "votes": []},
                         {"evidence_id": f"Ice:{i}", "evidence_label": "REFUTES", "article": "Ice",
                          "evidence": f"Glaciers never retreat {i}.", "votes": []},
                         {"evidence_id": f"Snow:{i}", "evidence_label": "NOT_ENOUGH_INFO", "article": "Snow",
                          "evidence": f"Snow is white {i}.", "votes": []}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    from factrl.verifier.model import build_tiny_encoder

    tmp = tmp_path_factory.mktemp("verifier-cli")
    base = build_tiny_encoder(tmp / "tiny")
    data = _climate(tmp / "data")
    run = tmp / "run"
    args = ["train", "verifier", "--out", str(run), "--data-dir", str(data), "--sources", "climate_fever",
            "--base", str(base), "--epochs", "1", "--batch-size", "8", "--max-length", "32", "--lora-r", "4"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("done:") and (run / "final" / "verifier.json").is_file()
    again = runner.invoke(app, [*args[:-2], "--lora-r", "8"])  # other settings on the same run: refused
    assert again.exit_code == 2 and "other settings" in again.output
    asset = tmp / "asset"
    r = runner.invoke(app, ["export", "verifier", "--run", str(run), "--out", str(asset),
                            "--command", "factrl train verifier ..."])
    assert r.exit_code == 0, r.output
    assert "climate_fever" in r.stdout and (run / "held_out.json").is_file()
    manifest = json.loads((asset / "manifest.json").read_text())
    assert manifest["commands"][0] == "factrl train verifier ..." and manifest["commands"][1].startswith(
        "factrl export verifier")
    assert set(manifest["held_out"]["sources"]) == {"climate_fever"} and manifest["seed"] == 0
    assert manifest["data"]["sources"]["climate_fever"]["held_out_ids_sha256"]
    return asset


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from factrl.retrieval.index import build_index

    out = tmp_path_factory.mktemp("idx") / "index"
    build_index(REPO / "tests" / "fixtures" / "mini_corpus.jsonl", out, progress=False)
    return out


def test_verify_with_retrieve_verify_loads_no_lm(shipped, index, monkeypatch):
    import factrl.lm.loader as loader

    monkeypatch.setenv("FACTRL_VERIFIER_DIR", str(shipped))
    monkeypatch.setattr(loader, "load_lm", lambda *a, **k: pytest.fail("an LM-free agent loaded an LM"))
    r = runner.invoke(app, ["verify", "Glaciers have retreated since 1850.", "--index", str(index),
                            "--agent", "retrieve_verify", "--json", "--trajectory"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["label"] in ("SUPPORT", "REFUTE", "NOT ENOUGH INFO") and 0.0 <= out["confidence"] <= 1.0
    assert out["format_ok"] and out["error"] is None
    assert out["trajectory"]["meta"]["scored"] and out["trajectory"]["meta"]["verifier"] == "factrl-verifier"
    r = runner.invoke(app, ["verify", "Glaciers have retreated since 1850.", "--index", str(index),
                            "--agent", "retrieve_verify"])
    assert "(confidence " in r.stdout


def test_eval_with_retrieve_verify(shipped, index, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTRL_VERIFIER_DIR", str(shipped))
    claims = tmp_path / "claims.jsonl"
    claims.write_text("".join(json.dumps({"id": f"c{i}", "claim": text, "label": lab}) + "\n" for i, (text, lab) in
                              enumerate([("Glaciers have retreated.", "SUPPORT"), ("Drones collect food.", "REFUTE"),
                                         ("Sourdough needs yeast.", "NEI")])))
    r = runner.invoke(app, ["eval", "--dataset", "jsonl", "--data-dir", str(claims), "--split", "x", "--index",
                            str(index), "--agent", "retrieve_verify", "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n"] == 3 and metrics["format_ok_rate"] == 1.0
    lines = (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()
    assert all("confidence" in json.loads(x)["meta"] for x in lines)


def test_a_missing_verifier_is_a_clear_error(index, tmp_path, monkeypatch):
    monkeypatch.setenv("FACTRL_VERIFIER_DIR", str(tmp_path / "nothing"))
    r = runner.invoke(app, ["verify", "Glaciers melt.", "--index", str(index), "--agent", "retrieve_verify"])
    assert r.exit_code != 0
    assert "verifier is not installed" in (r.output + str(r.exception))


def test_the_demo_prints_the_verifier_beside_the_agent(shipped, index, capsys):
    from factrl.demo.__main__ import _verifier_verdicts
    from factrl.retrieval.index import load_index
    from factrl.types import Claim

    claims = [Claim(id="a", text="Glaciers have retreated since 1850.", label="SUPPORT"),
              Claim(id="b", text="Sourdough needs commercial yeast.", label="REFUTE")]
    got = _verifier_verdicts(claims, load_index(index), str(shipped))
    assert set(got) == {"a", "b"} and all(t.verdict.label is not None and t.error is None for t in got.values())
    assert _verifier_verdicts(claims, load_index(index), str(index)) == {}  # not a verifier: a note, no crash
    assert "no verifier verdicts" in capsys.readouterr().out
