"""The trained agent shipped in factrl/assets/agent: intact, small, loads offline, and
`factrl verify` with every default returns a parsed verdict on a demo claim."""

import json
from importlib.resources import files
from pathlib import Path

import pytest

from factrl.lm.agent import ADAPTER_FILE, agent_asset_dir, agent_manifest, file_sha256


def test_adapter_matches_its_manifest_and_is_small():
    d = agent_asset_dir()
    manifest = agent_manifest(d)  # raises on a checksum mismatch
    assert manifest["sha256"] == file_sha256(d / ADAPTER_FILE)
    assert (d / ADAPTER_FILE).stat().st_size <= 10_000_000
    assert isinstance(manifest.get("seed"), int)
    for key in ("commands", "data", "held_out"):
        assert manifest.get(key), f"the manifest lacks {key!r}"
    assert manifest["held_out"]["scifact-online"]["n"] > 0
    config = json.loads((d / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == manifest["adapter"]["rank"]


def test_default_verify_gives_a_parsed_verdict_offline(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app
    from factrl.retrieval.index import build_index

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    corpus = Path(str(files("factrl.demo") / "corpus.jsonl"))
    index = tmp_path / "index"
    build_index(corpus, index, corpus_format="jsonl", retriever="bm25", unit_sentences=3)
    _load_commands()
    r = CliRunner().invoke(app, ["verify", "Mount Kilimanjaro, the highest mountain in Africa, stands in Tanzania.",
                                 "--index", str(index), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["error"] is None
    assert out["label"] in ("SUPPORT", "REFUTE", "NOT ENOUGH INFO"), out
    assert out["format_ok"], out["format_errors"]


@pytest.mark.parametrize("name", ["factrl-agent", "agent"])
def test_agent_names_resolve_to_the_merged_cache(name):
    from factrl.lm.loader import resolve_model

    source, display = resolve_model(name)
    assert display == "factrl-agent"
    assert json.loads((Path(source) / "factrl_agent.json").read_text())["adapter_sha256"] == agent_manifest()["sha256"]
