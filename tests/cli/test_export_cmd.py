import json

import pyarrow.parquet as pq
from typer.testing import CliRunner

from factrl.cli import _load_commands, app
from factrl.train.verl.export import read_verl_parquet

_load_commands()
runner = CliRunner()

ROWS = [
    {"id": "c1", "claim": "The Nile flows north.", "label": "SUPPORTS", "evidence": ["nile_sentence_1"],
     "evidence_text": {"nile_sentence_1": "It flows north."}},
    {"id": "c2", "claim": "The Amazon is in Africa.", "label": "REFUTES", "evidence": ["amazon_sentence_0"],
     "evidence_text": {"amazon_sentence_0": "The Amazon is in South America."}},
    {"id": "c3", "claim": "Bees can count.", "label": "NOT ENOUGH INFO"},
    {"id": "c4", "claim": "Unlabelled claim."},
]


def write_claims(tmp_path, rows=ROWS):
    path = tmp_path / "claims.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_export_verl_online(tmp_path):
    src, out = write_claims(tmp_path, ROWS[:3]), tmp_path / "out" / "train.parquet"
    res = runner.invoke(app, ["export", "verl", "--dataset", "jsonl", "--data-dir", str(src), "--split", "train",
                              "--limit", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "wrote 2 rows (veri_r1, split train)" in res.output
    claims = read_verl_parquet(out)
    assert [c.id for c in claims] == ["c1", "c2"]
    rows = pq.read_table(out).to_pylist()
    assert rows[0]["data_source"] == "jsonl" and rows[0]["reward_model"]["ground_truth"]["label"] == "SUPPORT"
    assert "You can search at most three times." in rows[0]["prompt"][0]["content"]


def test_export_verl_offline_skips_and_counts_when_asked(tmp_path):
    src, out = write_claims(tmp_path), tmp_path / "off.parquet"
    args = ["export", "verl", "--dataset", "jsonl", "--data-dir", str(src), "--mode", "offline", "--out", str(out),
            "--data-source", "toy", "--agent-name", "factrl_env"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1 and "c4" in res.output and "--skip-bad-rows" in res.output
    assert not out.exists()
    res = runner.invoke(app, args + ["--skip-bad-rows"])
    assert res.exit_code == 0, res.output
    assert "skipped 1 claims" in res.output and "wrote 3 rows (veri_r1_offline" in res.output
    table = pq.read_table(out)
    assert table.column("agent_name").to_pylist() == ["factrl_env"] * 3
    assert "[[nile_sentence_1]]: It flows north." in table.column("prompt").to_pylist()[0][0]["content"]


def test_bad_arguments(tmp_path):
    src = write_claims(tmp_path)
    base = ["export", "verl", "--dataset", "jsonl", "--data-dir", str(src)]
    assert runner.invoke(app, base + ["--out", str(tmp_path / "x.csv")]).exit_code == 2
    assert runner.invoke(app, base + ["--out", str(tmp_path / "x.parquet"), "--mode", "both"]).exit_code == 2
    res = runner.invoke(app, ["export", "verl", "--dataset", "nosuch", "--data-dir", str(src),
                              "--out", str(tmp_path / "x.parquet")])
    assert res.exit_code == 1 and "nosuch" in res.output
