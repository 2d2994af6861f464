"""The adapter export and merge behind the shipped agent, on tiny models; the shipped
adapter itself (checksum, size, offline load) in tests/test_shipped_agent.py."""

import json
import shutil

import pytest
import torch

from factrl.lm.agent import (ADAPTER_FILE, MANIFEST_FILE, AgentAssetError, agent_manifest, export_adapter,
                             file_sha256, merge_adapter)
from factrl.lm.tiny import build_tiny_model


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("base") / "m", layers=2, hidden=64, heads=4, seed=0)


def _load(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path))


def _lora_tuned(base, out, rank=4, seed=1):
    """A copy of ``base`` changed by a random rank-``rank`` product in every linear layer."""
    model = _load(base)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("proj.weight"):
                p.add_(torch.randn(p.shape[0], rank, generator=g) @ torch.randn(rank, p.shape[1], generator=g) * 0.01)
    model.save_pretrained(out)
    return model


def test_lora_change_exports_exactly_and_merges_back(base, tmp_path):
    tuned = _lora_tuned(base, tmp_path / "tuned", rank=4)
    report = export_adapter(tmp_path / "tuned", base, tmp_path / "adapter", rank=4, dtype="float32")
    assert report["layers"] == 2 * 7
    assert report["energy_kept"] == pytest.approx(1.0, abs=1e-6)
    assert report["not_carried"] == {}
    assert report["sha256"] == file_sha256(tmp_path / "adapter" / ADAPTER_FILE)
    merged = _load(base)
    assert merge_adapter(merged, tmp_path / "adapter") == 14
    want = dict(tuned.named_parameters())
    for name, p in merged.named_parameters():
        assert torch.allclose(p, want[name], atol=1e-5), name


def test_peft_reads_the_exported_adapter(base, tmp_path):
    peft = pytest.importorskip("peft")
    tuned = _lora_tuned(base, tmp_path / "tuned", rank=2, seed=3)
    export_adapter(tmp_path / "tuned", base, tmp_path / "adapter", rank=2, dtype="float32")
    model = peft.PeftModel.from_pretrained(_load(base), str(tmp_path / "adapter"))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, tuned(ids).logits, atol=1e-4)


def test_truncation_and_changes_outside_the_adapter_are_reported(base, tmp_path):
    model = _load(base)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("q_proj.weight"):
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(0)) * 0.01)  # full rank
            if name == "model.norm.weight":
                p.add_(0.5)
    model.save_pretrained(tmp_path / "tuned")
    report = export_adapter(tmp_path / "tuned", base, tmp_path / "adapter", rank=2)
    assert 0.0 < report["energy_kept"] < 0.5
    assert report["not_carried"] == {"model.norm.weight": pytest.approx(0.5, abs=1e-3)}


def test_an_adapter_for_another_shape_is_refused(base, tmp_path):
    _lora_tuned(base, tmp_path / "tuned")
    export_adapter(tmp_path / "tuned", base, tmp_path / "adapter", rank=4)
    other = _load(build_tiny_model(tmp_path / "wide", layers=2, hidden=96, heads=4))
    with pytest.raises(AgentAssetError, match="B·A is"):
        merge_adapter(other, tmp_path / "adapter")


def test_manifest_checksum_is_checked(base, tmp_path):
    _lora_tuned(base, tmp_path / "tuned")
    report = export_adapter(tmp_path / "tuned", base, tmp_path / "adapter", rank=4)
    (tmp_path / "adapter" / MANIFEST_FILE).write_text(json.dumps({"sha256": report["sha256"]}))
    assert agent_manifest(tmp_path / "adapter")["sha256"] == report["sha256"]
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "adapter", bad)
    data = bytearray((bad / ADAPTER_FILE).read_bytes())
    data[-1] ^= 0xFF
    (bad / ADAPTER_FILE).write_bytes(bytes(data))
    with pytest.raises(AgentAssetError, match="corrupt"):
        agent_manifest(bad)
    with pytest.raises(AgentAssetError, match="smollm2-base"):
        agent_manifest(tmp_path / "missing")


def test_export_command_writes_manifest_with_info(base, tmp_path):
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()

    _lora_tuned(base, tmp_path / "tuned")
    (tmp_path / "info.json").write_text(json.dumps({"seed": 0, "commands": ["factrl train sft ..."]}))
    r = CliRunner().invoke(app, ["export", "adapter", "--model", str(tmp_path / "tuned"), "--base", str(base),
                                 "--rank", "4", "--out", str(tmp_path / "a"), "--info", str(tmp_path / "info.json")])
    assert r.exit_code == 0, r.output
    manifest = agent_manifest(tmp_path / "a")
    assert manifest["seed"] == 0 and manifest["adapter"]["rank"] == 4
    assert manifest["sha256"] == file_sha256(tmp_path / "a" / ADAPTER_FILE)


def test_the_agents_own_environment_parameters_are_the_defaults(tmp_path, monkeypatch):
    import hashlib

    from factrl.cli._common import build_agent
    from factrl.lm.agent import CONFIG_FILE, agent_params

    d = tmp_path / "asset"
    d.mkdir()
    (d / ADAPTER_FILE).write_bytes(b"weights")
    (d / CONFIG_FILE).write_text("{}")
    (d / MANIFEST_FILE).write_text(json.dumps({
        "sha256": hashlib.sha256(b"weights").hexdigest(),
        "agent": {"name": "veri_r1", "context_sentences": 6,
                  "params": {"prompt": "short", "max_observation_chars": 1200}}}))
    monkeypatch.setenv("FACTRL_AGENT_DIR", str(d))
    assert agent_params("factrl-agent", "veri_r1") == {"prompt": "short", "max_observation_chars": 1200}
    assert agent_params("agent", "haris") == {} and agent_params("smollm2-base", "veri_r1") == {}
    spec, make_env = build_agent("veri_r1", ["max_observation_chars=800"], mode="offline", model="factrl-agent")
    assert spec.params == {"prompt": "short", "max_observation_chars": 800, "mode": "offline"}
    assert make_env().config.prompt == "short"
    spec, _ = build_agent("veri_r1", [], mode="offline", model="smollm2-base")
    assert spec.params == {"mode": "offline"}


def test_the_agents_own_context_size_is_the_default(tmp_path, monkeypatch):
    import hashlib

    from factrl.cli._common import resolve_context_sentences
    from factrl.lm.agent import CONFIG_FILE, agent_context_sentences

    d = tmp_path / "asset"
    d.mkdir()
    (d / ADAPTER_FILE).write_bytes(b"weights")
    (d / CONFIG_FILE).write_text("{}")
    (d / MANIFEST_FILE).write_text(json.dumps({"sha256": hashlib.sha256(b"weights").hexdigest(),
                                               "agent": {"name": "veri_r1", "context_sentences": 6}}))
    monkeypatch.setenv("FACTRL_AGENT_DIR", str(d))
    assert agent_context_sentences("factrl-agent", "veri_r1") == 6
    assert agent_context_sentences("factrl-agent", "haris") is None
    assert agent_context_sentences("smollm2-base", "veri_r1") is None
    assert resolve_context_sentences(None, "factrl-agent", "veri_r1") == 6
    assert resolve_context_sentences(9, "factrl-agent", "veri_r1") == 9  # an explicit value wins
    assert resolve_context_sentences(None, "smollm2-base", "veri_r1") == 16
    assert resolve_context_sentences(None, None, "veri_r1") == 16


def test_export_adapter_cli_computes_on_the_device_asked_and_records_it(base, tmp_path):
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()
    _lora_tuned(base, tmp_path / "tuned", rank=2, seed=5)
    r = CliRunner().invoke(app, ["export", "adapter", "--model", str(tmp_path / "tuned"), "--base", str(base),
                                 "--out", str(tmp_path / "adapter"), "--rank", "2", "--dtype", "float32",
                                 "--device", "cpu"])
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "adapter" / MANIFEST_FILE).read_text())
    assert manifest["adapter"]["device"] == "cpu" and manifest["adapter"]["energy_kept"] == pytest.approx(1.0)
