"""Keys and values kept between turns (factrl.lm.turn_cache): the same generations as a
full prefill, fewer prompt tokens run, and never reused across a weight change."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from factrl.lm import GenerationConfig, load_lm
from factrl.lm.hf import HFLM
from factrl.lm.tiny import build_tiny_model
from factrl.lm.turn_cache import TurnCache, weights_key


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> HFLM:
    out = build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=0)
    return load_lm(str(out), max_batch_size=8, device="cpu", dtype="float32")


def _contexts(lm: HFLM) -> list[list[int]]:
    texts = ["Claim: the Nile flows north through many countries before it reaches the sea at last. " * 2,
             "A shorter claim about a river and a city, said once and then said again in other words. " * 2,
             "x y z " * 20]
    return [lm.encode(t) for t in texts]


def _turns(lm: HFLM, contexts: list[list[int]], cfg: GenerationConfig, rounds: int = 3) -> list[list]:
    """Multi-turn play: each round every context grows by its generation and an observation."""
    obs = lm.encode(" Observation: the search found two passages about it.")
    out = []
    ctx = [list(c) for c in contexts]
    for _ in range(rounds):
        gens = lm.generate(ctx, cfg)
        out.append(gens)
        ctx = [c + g.token_ids + obs for c, g in zip(ctx, gens)]
    return out


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_reused_turns_generate_what_a_full_prefill_does(lm, temperature):
    cfg = GenerationConfig(max_new_tokens=12, temperature=temperature, seed=5)
    contexts = _contexts(lm)
    plain = _turns(lm, contexts, cfg)
    with lm.reuse_turns() as cache:
        reused = _turns(lm, contexts, cfg)
        stats = cache.stats
    for a_round, b_round in zip(plain, reused):
        for a, b in zip(a_round, b_round):
            assert a.token_ids == b.token_ids
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    # rounds 2 and 3 start from round 1's and 2's contexts: most of their prompts reused
    assert stats.hits >= 6
    assert stats.reused_tokens > 0.5 * stats.prompt_tokens
    assert lm._turns is None  # the block ended: nothing is kept


def test_a_row_alone_and_in_a_batch_with_reused_rows_agree(lm):
    """Rows with and without a stored prefix share one ragged prefill (sampled: each row
    has its own seed, so its sample does not depend on the batch)."""
    cfgs = [GenerationConfig(max_new_tokens=10, temperature=1.0, seed=s) for s in (1, 2, 3)]
    a, b, c = _contexts(lm)
    with lm.reuse_turns() as cache:
        first = lm.generate([a], cfgs[:1])[0]
        grown = a + first.token_ids + lm.encode(" and more text after it")
        mixed = lm.generate([grown, b, c], cfgs)  # only `grown` has a stored prefix
        # all of the first turn was reused: its prompt and every generated token but the
        # last, which was sampled and never run
        assert cache.stats.reused_tokens == len(a) + len(first.token_ids) - 1
    assert len(set(first.token_ids)) > 3  # a varied sample: a misaligned store would show
    single = [lm.generate([p], [cfg])[0] for p, cfg in zip((grown, b, c), cfgs)]
    for m, s in zip(mixed, single):
        assert m.token_ids == s.token_ids
        assert m.logprobs == pytest.approx(s.logprobs, abs=1e-4)


def test_two_prompts_extending_one_stored_context_in_one_call(lm):
    """The first takes the stored context whole (and drops it); the second finds what is
    left, and both generate what a full prefill does."""
    cfg = GenerationConfig(max_new_tokens=8, temperature=0.0)
    a = _contexts(lm)[0]
    with lm.reuse_turns() as cache:
        first = lm.generate([a], cfg)[0]
        grown = [a + first.token_ids + lm.encode(f" observation number {i} of the search") for i in (1, 2)]
        both = lm.generate(grown, cfg)
        assert cache.stats.hits == 1  # the one stored context, taken by the first prompt
    for g, prompt in zip(both, grown):
        assert g.token_ids == lm.generate([prompt], cfg)[0].token_ids


def test_a_weight_change_clears_the_cache(lm):
    cfg = GenerationConfig(max_new_tokens=6, temperature=0.0)
    ctx = _contexts(lm)[0]
    with lm.reuse_turns() as cache:
        gen = lm.generate([ctx], cfg)[0]
        assert len(cache) == 1
        before = weights_key(lm.model)
        weight = lm.model.get_input_embeddings().weight
        with torch.no_grad():
            weight.mul_(1.5)  # an in-place update, like an optimizer step
        try:
            assert weights_key(lm.model) != before
            grown = ctx + gen.token_ids + lm.encode(" more")
            after = lm.generate([grown], cfg)[0]
            assert cache.stats.cleared == 1 and cache.stats.hits == 0
            assert after.token_ids == lm.generate([grown], cfg)[0].token_ids
        finally:
            with torch.no_grad():
                weight.div_(1.5)


def test_budget_zero_turns_it_off(lm):
    with lm.reuse_turns(budget_gb=0) as cache:
        assert cache is None and lm._turns is None


def test_lookup_takes_the_longest_shared_prefix_and_evicts_oldest_first():
    def kv(n: int) -> list:
        return [(torch.zeros(1, n, 2), torch.zeros(1, n, 2))]

    per_token = 2 * 2 * 4  # keys and values, 2 floats each
    cache = TurnCache(budget_bytes=100 * per_token, min_tokens=4)
    cache.put(list(range(40)), kv(40))
    cache.put(list(range(20)) + [99] * 30, kv(50))
    assert cache.lookup(list(range(30)) + [7]) == (0, 30)
    assert cache.lookup([5] * 30) is None  # nothing shared
    assert cache.lookup(list(range(3)) + [7] * 10) is None  # shared, but under min_tokens
    # never the whole prompt: its last token must run for the logits
    assert cache.lookup(list(range(40))) == (0, 39)
    layers = cache.take(0, 30)
    assert layers[0][0].shape == (1, 30, 2) and len(cache) == 2  # taken in part: kept
    cache.put(list(range(100, 130)), kv(30))  # 120 tokens > 100: the least recently used goes
    assert len(cache) == 2 and cache.stats.evicted == 1
    assert cache.lookup(list(range(20)) + [99] * 31) == (0, 20)  # entry 1 was evicted, not 0 (just taken)
    assert cache.lookup(list(range(100, 131))) == (2, 30)
    cache.take(2, 30)
    assert len(cache) == 1 and cache.nbytes == 40 * per_token  # taken whole: dropped
