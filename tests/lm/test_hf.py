"""HFLM on a tiny random SmolLM2-shaped model: token truth, stopping, seeding, batching."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from factrl.lm import GenerationConfig, load_lm
from factrl.lm.hf import HFLM, StopChecker
from factrl.lm.tiny import build_tiny_model
from factrl.types import Message

TEXTS = [
    "Claim: the Nile flows north.",
    "x",
    "A much longer prompt, with many more words in it, so the other rows get left padding.",
]


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> HFLM:
    out = build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=0)
    return load_lm(str(out), max_batch_size=8)


@pytest.fixture(scope="module")
def prompts(lm) -> list[list[int]]:
    return [lm.encode(t) for t in TEXTS]


@pytest.fixture
def eos_bias(lm):
    """Make EOS likely (~1/3 per step) without making it certain, by shifting its logit."""
    def hook(module, inputs, output):
        output = output.clone()
        output[..., lm.eos_token_id] += 10.0
        return output

    handle = lm.model.lm_head.register_forward_hook(hook)
    yield
    handle.remove()


def test_loads_tiny_model_with_smollm2_tokenizer(lm):
    assert lm.model.config.num_hidden_layers == 2
    assert lm.eos_token_id == lm.pad_token_id == 2
    assert lm.tokenizer.convert_ids_to_tokens(2) == "<|im_end|>"


def test_sampled_logprobs_match_one_forward_recompute(lm, prompts):
    gens = lm.generate(prompts, GenerationConfig(max_new_tokens=16, temperature=0.8, seed=3))
    assert len(gens) == 3
    for prompt, gen in zip(prompts, gens):
        assert len(gen.token_ids) == len(gen.logprobs) == 16
        assert gen.finish_reason == "length" and gen.stop is None
        assert lm.decode(gen.token_ids) == gen.text
        recomputed = lm.token_logprobs(prompt, gen.token_ids, temperature=0.8)
        assert recomputed == pytest.approx(gen.logprobs, abs=1e-4)
        assert all(lp <= 0 for lp in gen.logprobs)


def test_batched_scoring_matches_single_rows(lm, prompts):
    conts = [lm.encode(" and then"), lm.encode(" a b c d e f g"), []]
    batched = lm.batch_token_logprobs(prompts, conts, temperature=1.0)
    for p, c, b in zip(prompts, conts, batched):
        assert len(b) == len(c)
        assert lm.token_logprobs(p, c) == pytest.approx(b, abs=1e-4)
    assert lm.score(prompts, conts) == pytest.approx([sum(b) for b in batched], abs=1e-4)
    assert lm.score(prompts[2:], [[]]) == [0.0]


def test_shared_prefix_scoring_matches_the_repeated_prompt(lm, prompts):
    conts = [lm.encode(" yes"), lm.encode(" no, not at all"), [], lm.encode(" maybe so")]
    shared = lm.shared_prefix_logprobs(prompts[1], conts)
    plain = lm.batch_token_logprobs([prompts[1]] * len(conts), conts, temperature=1.0)
    for s_row, p_row in zip(shared, plain):
        assert s_row == pytest.approx(p_row, abs=1e-4)
    assert shared[2] == []
    # score() takes the shared path for repeated prompts, the plain one for the rest.
    mixed_p = [prompts[1], prompts[0], prompts[1], prompts[1]]
    mixed_c = [conts[0], conts[1], conts[1], []]
    want = [sum(r) for r in lm.batch_token_logprobs(mixed_p, mixed_c, 1.0)]
    assert lm.score(mixed_p, mixed_c) == pytest.approx(want, abs=1e-4)
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        lm.score(prompts[:2], [conts[0]])


def test_score_uses_temperature_one(lm, prompts):
    cont = lm.encode(" the river")
    at_one = lm.token_logprobs(prompts[0], cont, temperature=1.0)
    at_half = lm.token_logprobs(prompts[0], cont, temperature=0.5)
    assert lm.score([prompts[0]], [cont])[0] == pytest.approx(sum(at_one), abs=1e-4)
    assert sum(at_half) != pytest.approx(sum(at_one), abs=1e-3)


def test_same_seed_same_output_other_seed_differs(lm, prompts):
    cfg = GenerationConfig(max_new_tokens=10, temperature=1.0, seed=11)
    a = lm.generate(prompts, cfg)
    b = lm.generate(prompts, cfg)
    c = lm.generate(prompts, GenerationConfig(max_new_tokens=10, temperature=1.0, seed=12))
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    assert [g.token_ids for g in a] != [g.token_ids for g in c]
    # Rows repeating one prompt (a GRPO group) still get different samples.
    group = lm.generate([prompts[0]] * 3, cfg)
    assert len({tuple(g.token_ids) for g in group}) == 3


def test_unseeded_generation_follows_torch_manual_seed(lm, prompts):
    cfg = GenerationConfig(max_new_tokens=8, temperature=1.0)
    torch.manual_seed(5)
    a = lm.generate(prompts[:1], cfg)
    torch.manual_seed(5)
    b = lm.generate(prompts[:1], cfg)
    assert a[0].token_ids == b[0].token_ids


def test_greedy_batch_equals_single_prompt(lm, prompts):
    cfg = GenerationConfig(max_new_tokens=12, temperature=0.0)
    batch = lm.generate(prompts, cfg)
    for prompt, gen in zip(prompts, batch):
        single = lm.generate([prompt], cfg)[0]
        assert single.token_ids == gen.token_ids
        assert single.logprobs == pytest.approx(gen.logprobs, abs=1e-4)
        # Greedy logprobs are recorded at temperature 1.
        assert lm.token_logprobs(prompt, gen.token_ids, 0.0) == pytest.approx(gen.logprobs, abs=1e-4)


def test_sampling_does_not_depend_on_chunking(lm, prompts):
    cfg = GenerationConfig(max_new_tokens=10, temperature=1.0, seed=21)
    many = prompts * 3
    whole = lm.generate(many, cfg)
    lm.max_batch_size = 2
    try:
        chunked = lm.generate(many, cfg)
    finally:
        lm.max_batch_size = 8
    assert [g.token_ids for g in whole] == [g.token_ids for g in chunked]


def test_tiny_top_p_is_greedy(lm, prompts):
    greedy = lm.generate(prompts, GenerationConfig(max_new_tokens=8, temperature=0.0))
    nucleus = lm.generate(prompts, GenerationConfig(max_new_tokens=8, temperature=1.0, top_p=1e-9, seed=1))
    assert [g.token_ids for g in greedy] == [g.token_ids for g in nucleus]


def test_stop_strings_stop_each_row_individually(lm, prompts):
    stops = ("e", "o")  # common letters, so random text hits them after a few tokens
    gens = lm.generate(prompts * 2, GenerationConfig(max_new_tokens=40, temperature=1.0, stop=stops, seed=7))
    lengths = set()
    for gen in gens:
        assert lm.decode(gen.token_ids) == gen.text
        if gen.finish_reason == "stop":
            assert gen.stop in stops and gen.stop in gen.text
            # It stopped at the first token that completed a stop string, and kept that token.
            before = lm.decode(gen.token_ids[:-1])
            assert not any(s in before for s in stops)
        else:
            assert gen.finish_reason in ("length", "eos")
            assert not any(s in gen.text for s in stops)
        lengths.add(len(gen.token_ids))
    assert sum(g.finish_reason == "stop" for g in gens) >= 4
    assert len(lengths) >= 2  # rows ended at different steps


def test_stop_checker_fires_on_the_token_completing_a_multi_token_stop(lm):
    text = "Let me look it up. <search>capital of France</search>\n\n<information>"
    ids = lm.encode(text)
    check = StopChecker(lm.tokenizer, ["</search>", "</answer>"])
    fired = [k for k in range(1, len(ids) + 1) if check(ids[:k]) is not None]
    assert fired, "the stop string was never found"
    k = fired[0]
    assert check(ids[:k]) == "</search>"
    assert "</search>" in lm.decode(ids[:k]) and "</search>" not in lm.decode(ids[: k - 1])
    assert len(lm.encode("</search>")) > 1  # the case is really multi-token


def test_max_new_tokens(lm, prompts):
    gens = lm.generate(prompts, GenerationConfig(max_new_tokens=5, temperature=1.0, seed=2))
    assert all(g.finish_reason == "length" and len(g.token_ids) == 5 for g in gens)
    empty = lm.generate(prompts, GenerationConfig(max_new_tokens=0))
    assert all(g.token_ids == [] and g.text == "" and g.finish_reason == "length" for g in empty)


def test_eos_ends_a_row_and_stays_in_the_ids(lm, prompts, eos_bias):
    gens = lm.generate(prompts * 3, GenerationConfig(max_new_tokens=30, temperature=1.0, seed=4))
    ended = [g for g in gens if g.finish_reason == "eos"]
    assert len(ended) >= 5
    assert len({len(g.token_ids) for g in ended}) >= 2
    for prompt, gen in zip(prompts * 3, gens):
        assert gen.token_ids.count(lm.eos_token_id) == (1 if gen.finish_reason == "eos" else 0)
        if gen.finish_reason == "eos":
            assert gen.token_ids[-1] == lm.eos_token_id
            assert "<|im_end|>" not in gen.text
            assert gen.text == lm.decode(gen.token_ids[:-1])
        # Rows left the batch at different steps; the survivors' logprobs are still exact.
        assert lm.token_logprobs(prompt, gen.token_ids, 1.0) == pytest.approx(gen.logprobs, abs=1e-4)


def test_chat_prompt_and_text_helpers(lm):
    ids = lm.chat_prompt_ids([Message(role="user", content="Is the Nile long?")])
    rendered = lm.decode(ids, skip_special_tokens=False)
    assert rendered.startswith("<|im_start|>system\n")
    assert rendered.endswith("<|im_start|>user\nIs the Nile long?<|im_end|>\n<|im_start|>assistant\n")
    assert lm.chat_prompt_ids([{"role": "user", "content": "Is the Nile long?"}]) == ids
    obs = "<information>[[nile_sentence_1]]: It flows north.</information>"
    assert lm.decode(lm.encode(obs)) == obs
    assert lm.tokenizer.bos_token_id not in lm.encode(obs)


def test_bad_prompts_get_clear_errors(lm, prompts):
    cfg = GenerationConfig(max_new_tokens=2)
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        lm.generate([prompts[0], []], cfg)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm.generate([[1, 10**6]], cfg)
    with pytest.raises(TypeError, match="token ids"):
        lm.generate(["a string"], cfg)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="temperature"):
        lm.generate(prompts, GenerationConfig(temperature=-1.0))
    with pytest.raises(ValueError, match="context"):
        lm.generate(prompts[:1], GenerationConfig(max_new_tokens=10**6))
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        lm.batch_token_logprobs(prompts[:2], [[1]])


def test_buffered_cache_layer_matches_concatenation():
    from factrl.lm.kv_cache import BufferedLayer

    layer = BufferedLayer(reserve=2)  # tiny reserve: the buffer must grow several times
    gen = torch.Generator().manual_seed(0)
    chunks = [torch.randn(3, 2, n, 4, generator=gen) for n in (5, 1, 1, 1, 1, 1, 1, 1, 1)]
    for i, chunk in enumerate(chunks):
        keys, values = layer.update(chunk, -chunk)
        expected = torch.cat(chunks[: i + 1], dim=-2)
        assert torch.equal(keys, expected) and torch.equal(values, -expected)
        assert layer.get_seq_length() == expected.shape[-2]
    layer.batch_select_indices(torch.tensor([2, 0, 0]))
    layer.drop_left(3)
    expected = torch.cat(chunks, dim=-2)[[2, 0, 0]][:, :, 3:]
    assert torch.equal(layer.keys, expected) and layer.get_seq_length() == expected.shape[-2]
    keys, _ = layer.update(chunks[1][:3], chunks[1][:3])
    assert torch.equal(keys, torch.cat([expected, chunks[1][:3]], dim=-2))


@pytest.fixture
def loop_bias(lm):
    """Make one token overwhelmingly likely every step: greedy decoding loops on it."""
    loop_token = lm.encode(" the")[0]

    def hook(module, inputs, output):
        output = output.clone()
        output[..., loop_token] += 50.0
        return output

    handle = lm.model.lm_head.register_forward_hook(hook)
    yield loop_token
    handle.remove()


def _ngrams(ids, n):
    return [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]


def test_banned_next_names_the_tokens_that_would_repeat_an_ngram():
    from factrl.lm.hf import banned_next

    assert banned_next([1, 2, 3, 1, 2], 3) == {3}
    assert banned_next([1, 2, 3, 1, 2], 2) == {3}
    assert banned_next([1, 2, 1, 4, 1], 2) == {2, 4}
    assert banned_next([5, 5], 1) == {5}
    assert banned_next([1, 2], 3) == set() and banned_next([], 1) == set() and banned_next([1, 2, 1], 0) == set()


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_no_repeat_ngram_breaks_a_loop_and_keeps_unguarded_logprobs(lm, prompts, loop_bias, temperature):
    loose = lm.generate(prompts[:1], GenerationConfig(max_new_tokens=12, temperature=temperature, seed=1))[0]
    assert loose.token_ids == [loop_bias] * 12  # the bias alone loops
    guarded = lm.generate(prompts[:1], GenerationConfig(max_new_tokens=12, temperature=temperature, seed=1,
                                                        no_repeat_ngram=2))[0]
    grams = _ngrams(guarded.token_ids, 2)
    assert len(guarded.token_ids) == 12 and len(set(grams)) == len(grams)
    assert guarded.token_ids[:2] == [loop_bias, loop_bias]  # the first repeat of a 2-gram is what is banned
    # The recorded logprobs are the unguarded distribution's, as documented.
    recomputed = lm.token_logprobs(prompts[0], guarded.token_ids, temperature=temperature)
    assert recomputed == pytest.approx(guarded.logprobs, abs=1e-4)
    assert min(guarded.logprobs[2:]) < -10  # banned-then-chosen alternatives were unlikely unguarded


def test_no_repeat_ngram_is_per_row(lm, prompts, loop_bias):
    rows = [GenerationConfig(max_new_tokens=10, temperature=0.0, no_repeat_ngram=n) for n in (0, 3, 0)]
    a, b, c = lm.generate(prompts, rows)
    assert a.token_ids == c.token_ids == [loop_bias] * 10
    grams = _ngrams(b.token_ids, 3)
    assert len(set(grams)) == len(grams) and b.token_ids[:3] == [loop_bias] * 3


@pytest.mark.parametrize("bad", [-1, True, 2.0])
def test_a_bad_no_repeat_ngram_is_a_clear_error(lm, prompts, bad):
    with pytest.raises(ValueError, match="no_repeat_ngram must be an integer"):
        lm.generate(prompts, GenerationConfig(max_new_tokens=2, no_repeat_ngram=bad))
    with pytest.raises(ValueError, match="no_repeat_ngram must be an integer"):
        lm.generate(prompts[:1], [GenerationConfig(max_new_tokens=2, no_repeat_ngram=bad)])
