"""Every command that loads a local model takes --device/--dtype, and refuses what this
machine cannot do before it reads data or loads a model."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from factrl.cli import _load_commands, app

torch = pytest.importorskip("torch")
_load_commands()
runner = CliRunner()


def _commands(tmp):
    missing = str(tmp / "missing")
    return {
        "verify": ["verify", "Rivers flow.", "--index", missing],
        "eval": ["eval", "--dataset", "jsonl", "--data-dir", missing, "--out", str(tmp / "eval")],
        "serve lm": ["serve", "lm", "--model", missing],
        "train grpo": ["train", "grpo", "--config", "veri_r1_offline_cpu", "--out", str(tmp / "grpo")],
        "train haris": ["train", "haris", "--config", "haris_cpu", "--out", str(tmp / "haris")],
        "train ffrr": ["train", "ffrr", "--config", "ffrr_cpu", "--out", str(tmp / "ffrr")],
        "train sft": ["train", "sft", "--trajectories", missing, "--out", str(tmp / "sft")],
        "train sft --decision-weight": ["train", "sft", "--trajectories", missing, "--out", str(tmp / "wsft"),
                                        "--decision-weight", "2"],
        "train factworld": ["train", "factworld", "--out", str(tmp / "factworld")],
        "train filter": ["train", "filter", "--dataset", "jsonl", "--data-dir", missing, "--out", str(tmp / "f")],
        "export adapter": ["export", "adapter", "--model", missing, "--out", str(tmp / "adapter")],
    }


COMMANDS = list(_commands(Path("/x")))


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_documents_the_flags(name):
    words = _commands(Path("/x"))[name]
    cut = 2 if words[0] in ("serve", "train", "export") else 1
    r = runner.invoke(app, [*words[:cut], "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "--device" in r.output and "--dtype" in r.output, r.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
@pytest.mark.parametrize("name", COMMANDS)
def test_cuda_on_a_machine_without_it_is_a_usage_error(name, tmp_path):
    r = runner.invoke(app, [*_commands(tmp_path)[name], "--device", "cuda"], env={"COLUMNS": "200"})
    assert r.exit_code == 2, r.output
    assert "torch.cuda.is_available() is False" in " ".join(r.output.split()), r.output
    assert not any(tmp_path.iterdir())  # nothing written, nothing read


@pytest.mark.parametrize("name", COMMANDS)
def test_an_unknown_dtype_is_a_usage_error(name, tmp_path):
    r = runner.invoke(app, [*_commands(tmp_path)[name], "--dtype", "fp8"], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "unknown dtype" in r.output, r.output


@pytest.mark.parametrize("name", ["train grpo", "train sft", "train sft --decision-weight"])
def test_float16_training_needs_a_gpu(name, tmp_path):
    r = runner.invoke(app, [*_commands(tmp_path)[name], "--device", "cpu", "--dtype", "float16",
                            *(["--set", "grpo.bf16=false"] if name == "train grpo" else [])],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "float16 mixed precision trains on a GPU only" in r.output, r.output


def test_grpo_bf16_and_another_dtype_conflict(tmp_path):
    r = runner.invoke(app, [*_commands(tmp_path)["train grpo"], "--dtype", "float32"], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "grpo.bf16 = true asks for bfloat16 but model.dtype is 'float32'" in r.output


def test_a_model_behind_an_api_takes_no_device(tmp_path):
    r = runner.invoke(app, ["eval", "--dataset", "jsonl", "--data-dir", str(tmp_path / "missing"),
                            "--out", str(tmp_path / "eval"), "--model", "openai:gpt-4o-mini", "--device", "cpu"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "--device applies to local models" in " ".join(r.output.split()), r.output
