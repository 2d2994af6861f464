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


def test_split_writes_the_runs_split_once_and_grpo_would_reuse_it(tmp_path):
    from factrl.datasets.prepare import DataSettings, prepare_splits

    data = REPO / "tests" / "fixtures" / "datasets" / "averitec"
    args = ["train", "split", "--config", "profact_cpu", "--set", f"data.data_dir={data}",
            "--set", "data.held_out_fraction=0.25", "--out", str(tmp_path / "run")]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    train = (tmp_path / "run" / "train_ids.txt").read_text().split()
    held = (tmp_path / "run" / "held_out_ids.txt").read_text().split()
    assert sorted(train + held) == ["0", "1", "2", "3"]  # the fixture's four claims, each once
    assert f"{len(train)} train" in res.output and f"{len(held)} held out" in res.output
    # Asked again with other settings, the recorded split stands (what a run will use).
    res = runner.invoke(app, [*args[:-4], "--set", "data.held_out_fraction=0.75", "--out", str(tmp_path / "run")])
    assert res.exit_code == 0 and "reusing" in res.output
    assert (tmp_path / "run" / "held_out_ids.txt").read_text().split() == held
    again, held_again = prepare_splits(DataSettings(dataset="averitec", data_dir=str(data), split="dev"), tmp_path / "run")
    assert [c.id for c in held_again] == held and [c.id for c in again] == train
    bad = runner.invoke(app, ["train", "split", "--config", "profact_cpu", "--set", "data.data_dir=/nonexistent",
                              "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 1 and "error:" in bad.output


def test_filter_runs_the_judge_on_the_requested_device_and_dtype(tmp_path):
    from factrl.lm.tiny import build_tiny_model

    tiny = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    claims = tmp_path / "claims.jsonl"
    claims.write_text(json.dumps({"id": "n1", "claim": "The Nile flows north.", "label": "SUPPORT",
                                  "evidence": ["nile_0"], "evidence_text": {"nile_0": "It flows north."}}) + "\n")
    out = tmp_path / "filter"
    res = runner.invoke(app, ["train", "filter", "--dataset", "jsonl", "--data-dir", str(claims), "--model", str(tiny),
                              "--out", str(out), "--device", "cpu", "--dtype", "bfloat16"])
    assert res.exit_code == 0, res.output
    info = json.loads((out / "run.json").read_text())
    assert (info["device"], info["dtype"], info["batch_size"], info["max_batch_size"]) == ("cpu", "bfloat16", 16, 32)
    assert "kept 0 of 1 claims" in res.output  # a random model solves nothing


def test_teach_writes_offline_episodes_unless_told_and_records_the_canonical_agent(tmp_path):
    """The template teacher's own default (mode=offline) comes from the teacher, not from
    a special case for one agent name; --param mode=online overrides it."""
    from factrl.teachers import teacher_env_defaults

    assert teacher_env_defaults("veri_r1") == {"mode": "offline"} and teacher_env_defaults("direct") == {}
    index = tmp_path / "index"
    assert runner.invoke(app, ["index", "build", "--corpus", str(CORPUS), "--out", str(index)]).exit_code == 0
    claims = tmp_path / "claims.jsonl"
    claims.write_text(json.dumps({"id": "n1", "claim": "The lighthouse keeper kept bees.", "label": "NEI",
                                  "cited_doc_ids": ["lighthouse"]}) + "\n")
    for extra, mode in (([], "offline"), (["--param", "mode=online"], "online")):
        out = tmp_path / mode
        res = runner.invoke(app, ["train", "teach", "--dataset", "jsonl", "--data-dir", str(claims), "--index",
                                  str(index), "--out", str(out), *extra])
        assert res.exit_code == 0, res.output
        assert json.loads((out / "run.json").read_text())["agent"] == {"name": "veri_r1", "params": {"mode": mode}}
        row = json.loads((out / "trajectories.jsonl").read_text().splitlines()[0])
        assert bool(row["searches"]) == (mode == "online")
