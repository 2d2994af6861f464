"""Float32 attention over a float32 cache for a bf16 CPU model (factrl.lm.f32_attention,
opt-in): the wrapped SDPA computes float32 attention only for that cache, leaves every
other call as transformers computes it, and bf16 decoding with it stays near float32."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from factrl.lm import GenerationConfig, load_lm  # noqa: E402
from factrl.lm.f32_attention import cpu_attention, install, store_dtype  # noqa: E402
from factrl.lm.kv_cache import new_cache  # noqa: E402
from factrl.lm.tiny import build_tiny_model  # noqa: E402


class _Module(torch.nn.Module):
    is_causal = True
    num_key_value_groups = 2


def _qkv(dtype):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 1, 16, generator=g)
    k = torch.randn(2, 2, 9, 16, generator=g)
    v = torch.randn(2, 2, 9, 16, generator=g)
    return q.to(dtype), k, v


def test_the_wrapper_widens_only_a_float32_cache():
    from transformers.modeling_utils import AttentionInterface

    assert install() and install()  # idempotent
    wrapped = AttentionInterface._global_mapping["sdpa"]
    original = wrapped.__wrapped__
    mask = torch.ones(2, 1, 1, 9, dtype=torch.bool)
    mask[0, ..., :3] = False  # a left-padded row
    q, k, v = _qkv(torch.bfloat16)
    out, _ = wrapped(_Module(), q, k, v, mask, scaling=0.25)
    exact, _ = original(_Module(), q.float(), k, v, mask, scaling=0.25)
    assert out.dtype == torch.bfloat16 and torch.equal(out, exact.to(torch.bfloat16))
    # the same dtypes everywhere (training, scoring): transformers' own result, bit for bit
    kb, vb = k.to(torch.bfloat16), v.to(torch.bfloat16)
    assert torch.equal(wrapped(_Module(), q, kb, vb, mask, scaling=0.25)[0],
                       original(_Module(), q, kb, vb, mask, scaling=0.25)[0])
    q32 = q.float()
    assert torch.equal(wrapped(_Module(), q32, k, v, mask, scaling=0.25)[0],
                       original(_Module(), q32, k, v, mask, scaling=0.25)[0])


def test_which_caches_are_kept_in_float32(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.delenv("FACTRL_CPU_ATTENTION", raising=False)
    assert cpu_attention() == "native" and store_dtype(cpu, torch.bfloat16) is None  # opt-in
    monkeypatch.setenv("FACTRL_CPU_ATTENTION", "float32")
    assert store_dtype(cpu, torch.bfloat16) == torch.float32
    assert store_dtype(cpu, torch.float16) == torch.float32
    assert store_dtype(cpu, torch.float32) is None
    assert store_dtype(torch.device("cuda"), torch.bfloat16) is None
    monkeypatch.setenv("FACTRL_CPU_ATTENTION", "native")
    assert store_dtype(cpu, torch.bfloat16) is None
    monkeypatch.setenv("FACTRL_CPU_ATTENTION", "fp8")
    with pytest.raises(ValueError, match="FACTRL_CPU_ATTENTION"):
        cpu_attention()


def test_a_buffered_layer_stores_in_its_dtype(tmp_path):
    from transformers import AutoConfig

    path = build_tiny_model(tmp_path / "m", layers=2, hidden=32, heads=2)
    cache = new_cache(AutoConfig.from_pretrained(str(path)), reserve=4, store_dtype=torch.float32)
    k = torch.randn(1, 1, 3, 16, dtype=torch.bfloat16)
    keys, values = cache.layers[0].update(k, k)
    assert keys.dtype == torch.float32 and torch.equal(keys, k.float())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=0)


def _decode(path, dtype, setting, monkeypatch, prompts):
    monkeypatch.setenv("FACTRL_CPU_ATTENTION", setting)
    lm = load_lm(str(path), max_batch_size=4, device="cpu", dtype=dtype)
    with lm.reuse_turns() as turns:
        first = lm.generate(prompts, GenerationConfig(max_new_tokens=16, temperature=0.0, seed=1))
        stored = {e.layers[0][0].dtype for e in turns._entries.values()}
        # a second turn takes the stored keys and values of the first
        longer = [p + g.token_ids + lm.encode(" and then") for p, g in zip(prompts, first)]
        second = lm.generate(longer, GenerationConfig(max_new_tokens=16, temperature=0.0, seed=1))
        hits = turns.stats.hits
    return first + second, hits, stored


def test_bf16_decoding_with_it_stays_near_float32(tiny, monkeypatch):
    """Turn by turn, with a stored context taken up again: the float32 store is what runs
    (its entries are float32), and greedy decoding follows the float32 model's."""
    lm = load_lm(str(tiny), max_batch_size=4, device="cpu", dtype="float32")
    prompts = [lm.encode("Claim: the Nile flows north through many lands. " * 6), lm.encode("x y z " * 25)]
    ref, _, stored = _decode(tiny, "float32", "float32", monkeypatch, prompts)
    assert stored == {torch.float32}
    wide, hits, stored = _decode(tiny, "bfloat16", "float32", monkeypatch, prompts)
    assert hits == 2 and stored == {torch.float32}
    native, _, stored = _decode(tiny, "bfloat16", "native", monkeypatch, prompts)
    assert stored == {torch.bfloat16}
    for gens in (wide, native):
        same, gaps = 0, []
        for a, b in zip(ref, gens):
            for ta, tb, la, lb in zip(a.token_ids, b.token_ids, a.logprobs, b.logprobs):
                if ta != tb:
                    break
                same += 1
                gaps.append(abs(la - lb))
        assert same > 32 and max(gaps) < 0.05  # bf16 rounding, not another computation
