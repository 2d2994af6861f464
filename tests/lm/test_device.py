"""``factrl.lm.device``: one resolver for --device/--dtype, and the generation batch that follows the device."""

import pytest

from _support import pretend_cuda

torch = pytest.importorskip("torch")

from factrl.lm.device import (CPU_BATCH_SIZE, CUDA_BATCH_SIZE, DeviceError, default_batch_size,  # noqa: E402
                              resolve_device, resolve_dtype, torch_dtype)

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")


@pytest.fixture
def fake_cuda(monkeypatch):
    """Pretend two CUDA devices: cuda:0 with native bf16 (compute capability 8), cuda:1 without (7)."""
    pretend_cuda(monkeypatch, (8, 7))


@no_cuda
def test_auto_is_cpu_without_cuda_and_cuda_is_refused_clearly():
    assert resolve_device("auto") == resolve_device(None) == "cpu"
    assert resolve_device("CPU") == "cpu"
    for name in ("cuda", "cuda:0", "cuda:1"):
        with pytest.raises(DeviceError, match=r"requested but torch.cuda.is_available\(\) is False"):
            resolve_device(name)


@pytest.mark.parametrize("bad, message", [("gpu", "unknown device"), ("cuda:x", "must be a number"),
                                          ("cuda:-1", "must be a number"), ("mps:0", "unknown device"),
                                          ("", "unknown device")])
def test_bad_device_names_are_refused_before_any_cuda_check(bad, message):
    with pytest.raises(DeviceError, match=message):
        resolve_device(bad)


def test_cuda_names_resolve_to_an_index_and_a_missing_gpu_is_refused(fake_cuda):
    assert resolve_device("auto") == resolve_device("cuda") == "cuda:0"
    assert resolve_device("cuda:1") == resolve_device(" CUDA:1 ") == "cuda:1"
    with pytest.raises(DeviceError, match=r"'cuda:2' requested but only 2 CUDA device\(s\) are visible"):
        resolve_device("cuda:2")


def test_auto_dtype_is_float32_on_cpu_and_bf16_on_a_gpu_that_has_it(fake_cuda):
    assert resolve_dtype("auto", "cpu") == resolve_dtype(None, "cpu") == "float32"
    assert resolve_dtype("auto", "cuda:0") == "bfloat16"
    assert resolve_dtype("auto", "cuda:1") == "float32"  # compute capability 7: bf16 only emulated
    assert resolve_dtype("fp16", "cuda:1") == "float16"  # an explicit dtype is kept


def test_dtype_spellings_and_unknown_ones():
    for name, want in [("bf16", "bfloat16"), ("BFloat16", "bfloat16"), ("torch.float16", "float16"),
                       ("half", "float16"), ("fp32", "float32"), (torch.bfloat16, "bfloat16")]:
        assert resolve_dtype(name, "cpu") == want
    assert torch_dtype("bf16") is torch.bfloat16 and torch_dtype(torch.float16) is torch.float16
    with pytest.raises(DeviceError, match="unknown dtype 'int8'"):
        resolve_dtype("int8", "cpu")
    with pytest.raises(DeviceError, match="unknown dtype 'auto'"):
        torch_dtype("auto")  # only resolved names reach torch


def test_the_generation_batch_follows_the_device():
    assert default_batch_size("cpu") == CPU_BATCH_SIZE == 32
    assert default_batch_size("cuda:0") == default_batch_size(torch.device("cuda", 1)) == CUDA_BATCH_SIZE == 256


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=1, hidden=32, heads=2)


def test_a_tiny_model_loads_in_bfloat16_on_cpu_and_generates(tiny_dir):
    from factrl.lm.base import GenerationConfig
    from factrl.lm.loader import load_lm

    lm = load_lm(str(tiny_dir), device="cpu", dtype="bfloat16")
    assert all(p.dtype == torch.bfloat16 for p in lm.model.parameters())
    assert lm.runtime_info() == {"device": "cpu", "dtype": "bfloat16", "max_batch_size": 32, "turn_cache_gb": 2.0, "cpu_attention": "native"}
    prompt = lm.chat_prompt_ids([{"role": "user", "content": "Is the Nile long?"}])
    (gen,) = lm.generate([prompt], GenerationConfig(max_new_tokens=6, temperature=0.0))
    assert len(gen.token_ids) == 6 and all(isinstance(x, float) and x <= 0 for x in gen.logprobs)
    default = load_lm(str(tiny_dir))  # auto on this machine
    assert default.runtime_info()["dtype"] == "float32"
    assert load_lm(str(tiny_dir), max_batch_size=4).max_batch_size == 4


@no_cuda
def test_loading_on_a_missing_gpu_is_a_load_error_naming_it(tiny_dir):
    from factrl.lm.loader import LMLoadError, load_lm

    with pytest.raises(LMLoadError, match=r"'cuda' requested but torch.cuda.is_available\(\) is False"):
        load_lm(str(tiny_dir), device="cuda")
    with pytest.raises(LMLoadError, match="unknown dtype"):
        load_lm(str(tiny_dir), dtype="fp8")
