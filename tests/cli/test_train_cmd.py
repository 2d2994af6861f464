import json

from typer.testing import CliRunner

from factrl.cli import _load_commands, app

from _support import REPO

_load_commands()
runner = CliRunner()
CORPUS = REPO / "tests" / "fixtures" / "mini_corpus.jsonl"


def test_teach_offline_context_sentences_bounds_the_prompt(tmp_path):
    index = tmp_path / "index"
    res = runner.invoke(app, ["index", "build", "--corpus", str(CORPUS), "--out", str(index), "--unit-sentences", "1"])
    assert res.exit_code == 0, res.output
    claims = tmp_path / "claims.jsonl"
    claims.write_text(json.dumps({"id": "n1", "claim": "The lighthouse keeper kept bees.", "label": "NEI",
                                  "cited_doc_ids": ["lighthouse", "honeybee"]}) + "\n")
    sentences = {}
    for n in (2, 5):
        out = tmp_path / f"teach{n}"
        res = runner.invoke(app, ["train", "teach", "--dataset", "jsonl", "--data-dir", str(claims), "--index",
                                  str(index), "--out", str(out), "--context-sentences", str(n)])
        assert res.exit_code == 0, res.output
        row = json.loads((out / "trajectories.jsonl").read_text().splitlines()[0])
        prompt = row["prompt"][-1]["content"]
        sentences[n] = prompt.count("[[lighthouse") + prompt.count("[[honeybee")
        assert row["verdict"]["format_ok"]
    # the lighthouse abstract has 4 sentences, so 5 reaches into the cited honeybee one
    assert sentences == {2: 2, 5: 5}
    res = runner.invoke(app, ["train", "teach", "--dataset", "jsonl", "--data-dir", str(claims), "--index",
                              str(index), "--out", str(tmp_path / "bad"), "--context-sentences", "0"])
    assert res.exit_code == 2
