"""The shipped agent's recipe lives in the package (factrl train embedded-agent): the
shipped manifest's commands name it, not benchmarks/, and each parses (--dry-run)."""

import json
import shlex

import pytest
from typer.testing import CliRunner

from factrl.cli import _load_commands, app
from factrl.lm.agent import agent_manifest
from factrl.recipes.embedded_agent import COMMAND, EmbeddedAgentSettings, plan
from factrl.recipes.embedded_agent.ship import recipe_commands

from _support import REPO

_load_commands()
runner = CliRunner()


def test_the_shipped_manifest_rebuilds_with_the_package_command_alone():
    commands = agent_manifest()["commands"]
    assert not any("benchmarks/" in c for c in commands)
    recipe = [c for c in commands if c.startswith(COMMAND)]
    assert len(recipe) == 2
    for command in recipe:
        args = shlex.split(command)[1:]  # after "factrl"
        r = runner.invoke(app, [*args, "--dry-run"])
        assert r.exit_code == 0, (command, r.output)
        assert "agent: {'name': 'veri_r1', 'params': {'prompt': 'short', 'max_observation_chars': 1200" in r.output


def test_the_recipe_writes_its_own_command_into_a_manifest(tmp_path):
    settings = EmbeddedAgentSettings(out=tmp_path, agent_param_items=["prompt=short"], teach_items=["scifact=5,5"])
    cmds = recipe_commands(settings, str(tmp_path / "sft" / "final"), "t")
    assert cmds[-1] == (f"{COMMAND} --out {tmp_path} --agent-param prompt=short --teach scifact=5,5 --sft-lr 0.0002 "
                        f"--sft-epochs 1.0 --sft-max-length 1150 --lora-r 16 ship --model {tmp_path}/sft/final --tag t")
    assert settings.agent("online").model_dump() == {"name": "veri_r1", "params": {"prompt": "short", "mode": "online"}}


def test_bad_stages_and_options_are_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="unknown stage"):
        plan(EmbeddedAgentSettings(out=tmp_path), ["teach", "bake"])
    with pytest.raises(ValueError, match="ship needs --model and --tag"):
        plan(EmbeddedAgentSettings(out=tmp_path), ["ship"])
    with pytest.raises(ValueError, match="SOURCE=OFFLINE,ONLINE"):
        EmbeddedAgentSettings(teach_items=["scifact=5"])
    r = runner.invoke(app, ["train", "embedded-agent", "eval", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "eval needs --model" in r.output
    assert not any(tmp_path.iterdir())  # nothing written


def test_the_benchmark_wrapper_and_the_drill_need_no_path_edits():
    for name in ("embedded_agent.py", "judgement_drill.py"):
        text = (REPO / "benchmarks" / name).read_text()
        assert "sys.path" not in text, name
    assert "factrl.recipes.embedded_agent" in (REPO / "benchmarks" / "judgement_drill.py").read_text()
    assert json.loads((REPO / "src" / "factrl" / "assets" / "agent" / "manifest.json").read_text())["agent"]["name"] \
        == "veri_r1"
