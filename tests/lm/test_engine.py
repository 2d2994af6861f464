"""The decode engine's logic on the CPU (no CUDA graphs): it must produce what the eager
loop produces — tokens exactly, logprobs to float precision — for greedy and seeded
sampling, stop strings, EOS, per-row budgets, queued rows, groups and LoRA adapters."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from factrl.lm import GenerationConfig, load_lm
from factrl.lm.engine import engine_unsupported
from factrl.lm.engine.engine import DecodeEngine
from factrl.lm.engine.rng import uniform, uniform_tensor
from factrl.lm.engine.stops import build_stop_tables, token_bytes
from factrl.lm.hf import HFLM, StopChecker
from factrl.lm.tiny import build_tiny_model

TEXTS = [
    "Claim: the Nile flows north.",
    "x",
    "A much longer prompt, with many more words in it, so the rows differ in length.",
    "Claim: the Nile flows north.",  # a repeated prompt: prefilled once
    "<search> Veri-R1 </search>",
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=0)


def _pair(path, slots: int = 4) -> tuple[HFLM, HFLM]:
    eager = load_lm(str(path), max_batch_size=slots)
    engine = HFLM(eager.model, eager.tokenizer, max_batch_size=slots, engine="on")
    assert isinstance(eager, HFLM)
    eager.engine = "off"
    return eager, engine


@pytest.fixture(scope="module")
def pair(tiny_dir):
    return _pair(tiny_dir)


def _same(a, b, tol: float = 1e-4) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids
        assert (x.finish_reason, x.stop, x.text) == (y.finish_reason, y.stop, y.text)
        assert y.logprobs == pytest.approx(x.logprobs, abs=tol)


def _prompts(lm: HFLM, n: int) -> list[list[int]]:
    return [lm.encode(TEXTS[i % len(TEXTS)]) + ([] if i < len(TEXTS) else lm.encode(f" row {i}")) for i in range(n)]


@pytest.mark.parametrize("temperature", [0.0, 0.8, 1.0])
def test_engine_matches_eager(pair, temperature):
    eager, engine = pair
    prompts = _prompts(eager, 11)  # more rows than the 4 slots: queued rows refill freed slots
    cfgs = [GenerationConfig(max_new_tokens=3 + 5 * (i % 3), temperature=temperature, seed=None) for i in range(11)]
    cfg = GenerationConfig(max_new_tokens=12, temperature=temperature, seed=7)
    _same(eager.generate(prompts, cfg), engine.generate(prompts, cfg))
    per_row = [GenerationConfig(max_new_tokens=c.max_new_tokens, temperature=temperature, seed=100 + i)
               for i, c in enumerate(cfgs)]
    a, b = eager.generate(prompts, per_row), engine.generate(prompts, per_row)
    _same(a, b)
    assert [len(g.token_ids) for g in b] == [c.max_new_tokens for c in per_row]  # each row's own budget


def test_engine_uses_slots_continuously_and_prefills_groups_once(pair):
    eager, engine = pair
    prompts = [eager.encode("one prompt")] * 4 + [eager.encode("another")] * 4
    cfgs = [GenerationConfig(max_new_tokens=2 if i % 2 else 9, temperature=1.0, seed=i) for i in range(8)]
    _same(eager.generate(prompts, cfgs), engine.generate(prompts, cfgs))
    from factrl.lm.hf import _ENGINES

    stats = _ENGINES[engine.model].stats
    assert stats.prefills <= 3  # two distinct prompts; a group may straddle one refill
    assert stats.prefill_rows == 8


def test_engine_stop_strings_and_eos_match_eager(pair):
    eager, engine = pair
    prompts = _prompts(eager, 6)
    free = eager.generate(prompts, GenerationConfig(max_new_tokens=20, temperature=1.0, seed=3))
    # Stop strings taken from the middle of what the rows produce, so several rows stop early.
    stops = sorted({g.text[len(g.text) // 2: len(g.text) // 2 + 2] for g in free if len(g.text) > 6})[:3]
    assert stops
    cfg = GenerationConfig(max_new_tokens=20, temperature=1.0, seed=3, stop=stops)
    a, b = eager.generate(prompts, cfg), engine.generate(prompts, cfg)
    _same(a, b)
    assert any(g.finish_reason == "stop" for g in b)
    # EOS: treat a token the rows produce as an end-of-sequence token.
    eos = free[0].token_ids[4]
    for lm in pair:
        lm.eos_token_ids = frozenset(lm.eos_token_ids | {eos})
    from factrl.lm.hf import _ENGINES

    _ENGINES.pop(engine.model, None)
    try:
        a = eager.generate(prompts, GenerationConfig(max_new_tokens=20, temperature=1.0, seed=3))
        b = engine.generate(prompts, GenerationConfig(max_new_tokens=20, temperature=1.0, seed=3))
        _same(a, b)
        assert b[0].finish_reason == "eos" and b[0].token_ids[-1] == eos
    finally:
        for lm in pair:
            lm.eos_token_ids = frozenset(lm.eos_token_ids - {eos})
        _ENGINES.pop(engine.model, None)


def test_engine_row_result_does_not_depend_on_its_batch(pair):
    _, engine = pair
    prompts = _prompts(engine, 7)
    cfgs = [GenerationConfig(max_new_tokens=10, temperature=1.0, seed=50 + i) for i in range(7)]
    full = engine.generate(prompts, cfgs)
    alone = engine.generate([prompts[5]], [cfgs[5]])
    _same([full[5]], alone)


def test_engine_top_p_and_multi_step_windows(tiny_dir):
    eager = load_lm(str(tiny_dir), max_batch_size=8)
    eager.engine = "off"
    model = eager.model
    engine = DecodeEngine(model, eager.tokenizer, sorted(eager.eos_token_ids), max_slots=8, steps_per_sync=5)
    prompts = _prompts(eager, 6)
    cfgs = [GenerationConfig(max_new_tokens=4 + i, temperature=0.9, top_p=0.7, seed=i, stop=("ab",)) for i in range(6)]
    seeds = HFLM._row_seeds(cfgs, cfgs)
    _same(eager.generate(prompts, cfgs), engine.generate(prompts, cfgs, seeds))
    assert engine.stats.windows >= 1


def test_engine_reads_lora_adapters_live(tiny_dir):
    peft = pytest.importorskip("peft")
    base = load_lm(str(tiny_dir), max_batch_size=4)
    model = peft.get_peft_model(base.model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"],
                                                            lora_alpha=8, lora_dropout=0.0))
    eager = HFLM(model, base.tokenizer, max_batch_size=4, engine="off")
    engine = HFLM(model, base.tokenizer, max_batch_size=4, engine="on")
    prompts = _prompts(eager, 5)
    cfg = GenerationConfig(max_new_tokens=8, temperature=0.0)
    before = engine.generate(prompts, cfg)
    with torch.no_grad():  # an optimizer step on the adapter: the engine must see it
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.5)
    after_eager, after = eager.generate(prompts, cfg), engine.generate(prompts, cfg)
    _same(after_eager, after)
    assert [g.token_ids for g in after] != [g.token_ids for g in before]


def test_engine_runs_qwen2_family(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    from factrl.lm.embedded import ensure_embedded_model

    tok = AutoTokenizer.from_pretrained(str(ensure_embedded_model()))
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                      eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    eager = HFLM(model, tok, max_batch_size=4, engine="off")
    engine = HFLM(model, tok, max_batch_size=4, engine="on")
    prompts = _prompts(eager, 6)
    for t in (0.0, 1.0):
        cfg_ = GenerationConfig(max_new_tokens=9, temperature=t, seed=11, stop=("e",))
        _same(eager.generate(prompts, cfg_), engine.generate(prompts, cfg_))


def test_engine_refuses_what_it_cannot_run(pair, tiny_dir):
    eager, engine = pair
    with pytest.raises(ValueError, match="repetition guard"):
        from factrl.lm.hf import _ENGINES

        _ENGINES[engine.model].generate([[1, 2]], [GenerationConfig(no_repeat_ngram=3)], [1])
    # with the guard on, HFLM quietly uses the eager loop (same result as eager)
    cfg = GenerationConfig(max_new_tokens=6, temperature=0.0, no_repeat_ngram=2)
    _same(eager.generate(_prompts(eager, 2), cfg), engine.generate(_prompts(eager, 2), cfg))
    with pytest.raises(ValueError, match="engine must be one of"):
        HFLM(eager.model, eager.tokenizer, engine="fast")


def test_engine_unsupported_models_fall_back_or_fail():
    from transformers import GPT2Config, GPT2LMHeadModel

    from factrl.lm.embedded import ensure_embedded_model
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(ensure_embedded_model()))
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2,
                                       eos_token_id=tok.eos_token_id)).eval()
    assert "gpt2" in engine_unsupported(model, tok)
    auto = HFLM(model, tok, engine="auto")  # on the CPU, auto is eager anyway
    assert len(auto.generate([[5, 6]], GenerationConfig(max_new_tokens=3, temperature=0.0))[0].token_ids) == 3
    forced = HFLM(model, tok, engine="on")
    with pytest.raises(ValueError, match="cannot run"):
        forced.generate([[5, 6]], GenerationConfig(max_new_tokens=3))


def test_counter_rng_is_the_same_in_python_and_torch():
    rnd = random.Random(0)
    seeds = [rnd.getrandbits(63) for _ in range(50)] + [0, 1, 2**63 - 1]
    idx = [rnd.randrange(10**6) for _ in range(len(seeds))]
    got = uniform_tensor(torch.tensor(seeds), torch.tensor(idx)).tolist()
    assert got == [uniform(s, i) for s, i in zip(seeds, idx)]
    assert all(0 <= x < 1 for x in got)
    draws = [uniform(12345, i) for i in range(20000)]
    assert abs(sum(draws) / len(draws) - 0.5) < 0.01  # uniform enough for sampling


def test_stop_automaton_agrees_with_the_decoding_stop_checker(pair):
    eager, _ = pair
    tok = eager.tokenizer
    pieces = token_bytes(tok, eager.vocab_size)
    assert pieces is not None and pieces[eager.eos_token_id] == b""
    stops = ["</search>", "</answer>", "ch>", "\n\n"]
    tables = build_stop_tables(stops, pieces)
    checker = StopChecker(tok, stops)
    rnd = random.Random(1)
    texts = ["a </search> b", "x </answer>", "<search> q </sea" + "rch>", "end\n\nnext", "no stop here",
             "</ans" + "wer></search>", "mixed ch> then </search>"]
    vocab_sample = [rnd.randrange(eager.vocab_size) for _ in range(400)]
    seqs = [eager.encode(t) for t in texts] + [[rnd.choice(vocab_sample + eager.encode("</search>\n\n"))
                                                for _ in range(30)] for _ in range(200)]
    for ids in seqs:
        state, got, want = 0, None, None
        for n in range(1, len(ids) + 1):
            hit = int(tables.hit[state, ids[n - 1]])
            state = int(tables.next_state[state, ids[n - 1]])
            want = checker(ids[:n])
            got = stops[hit] if hit >= 0 else None
            assert got == want, (ids[:n], got, want)
            if want is not None:
                break


def test_engine_reuses_a_longer_pool_instead_of_building_another(tiny_dir):
    eager = load_lm(str(tiny_dir), max_batch_size=4)
    engine = DecodeEngine(eager.model, eager.tokenizer, sorted(eager.eos_token_ids), max_slots=4, max_pools=2)
    long_prompt = eager.encode("word " * 300)  # needs 512 positions
    short = eager.encode("a short one")  # needs 256
    cfg = [GenerationConfig(max_new_tokens=4, temperature=0.0)]
    engine.generate([long_prompt], cfg, [1])
    engine.generate([short], cfg, [1])
    assert [k[1] for k in engine._pools] == [512]  # the 512-position pool served both
    engine.generate([eager.encode("word " * 1000)], cfg, [1])  # 1024: a new pool
    engine.generate([eager.encode("word " * 3000)], cfg, [1])  # 4096: the oldest is dropped
    assert sorted(k[1] for k in engine._pools) == [1024, 4096]
    a = engine.generate([short], cfg, [1])[0]
    eager.engine = "off"
    assert a.token_ids == eager.generate([short], cfg)[0].token_ids


def test_nan_weights_fail_the_rows_not_the_trajectory_file(tiny_dir):
    from factrl.lm.base import RowFailures

    lm = load_lm(str(tiny_dir), max_batch_size=4)
    with torch.no_grad():
        lm.model.lm_head.weight[5].fill_(float("nan"))  # tied: embedding row 5 and its logit
    try:
        for mode in ("off", "on"):
            lm.engine = mode
            with pytest.raises(RowFailures) as got:
                lm.generate([[5, 6, 7], [8, 9]], GenerationConfig(max_new_tokens=3, temperature=1.0, seed=1))
            errors = got.value.errors
            assert isinstance(errors[0], FloatingPointError) and "not finite" in str(errors[0])
    finally:
        with torch.no_grad():
            lm.model.lm_head.weight[5].normal_(0, 0.02)


def test_engine_slots_left_by_a_call_with_other_stop_strings_do_not_index_its_tables(tiny_dir):
    # One model playing two agents alternates calls with different stop strings (HARIS's
    # reasoner and search agent). A slot keeps the stop-set index and automaton state its
    # last row left; the next call's tables may be smaller, and its decode window reads
    # every slot of its bucket, empty ones too (on CUDA: a device-side assert, on the GPU).
    eager = load_lm(str(tiny_dir), max_batch_size=4)
    engine = DecodeEngine(eager.model, eager.tokenizer, sorted(eager.eos_token_ids), max_slots=4)
    prompts = _prompts(eager, 4)
    first = [GenerationConfig(max_new_tokens=8, temperature=1.0, stop=["</q>"])] * 2 + [
        GenerationConfig(max_new_tokens=8, temperature=1.0, stop=["</search>", "</report>"])] * 2
    engine.generate(prompts, first, [1, 2, 3, 4])
    (pool,) = engine._pools.values()
    assert int(pool.sset.max()) == 1
    # What a longer automaton can leave behind: a state the next call's tables lack.
    pool.sstate.fill_(10_000)
    cfg = GenerationConfig(max_new_tokens=6, temperature=1.0, stop=["."], seed=5)
    got = engine.generate(prompts[:3], [cfg] * 3, [5, 6, 7])  # bucket 4: one slot stays empty
    fresh = DecodeEngine(eager.model, eager.tokenizer, sorted(eager.eos_token_ids), max_slots=4)
    want = fresh.generate(prompts[:3], [cfg] * 3, [5, 6, 7])
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    assert all(g.token_ids for g in got)
