"""The agent loop against verl's own interfaces (skipped where verl cannot be imported).

verl's ``AgentLoopBase`` builds the prompt with its Continuous Token builder from a
Hugging Face tokenizer; the test makes a tiny byte-level one (no download) and a fake
``server_manager`` whose ``generate`` plays scripted turns as token ids.
"""

import asyncio

import pyarrow.parquet as pq
import pytest

agent_loop_api = pytest.importorskip(
    "verl.experimental.agent_loop.agent_loop", reason="verl (with ray, tensordict, hydra-core) is not importable"
)

from omegaconf import OmegaConf  # noqa: E402  (verl's dependency, importable when verl is)
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from factrl.envs.veri_r1 import VeriR1Env  # noqa: E402
from factrl.train.verl import EXAMPLES_DIR, agent_loop as loop_mod  # noqa: E402
from factrl.train.verl.agent_loop import AGENT_NAME, FactrlEnvAgentLoop, stop_params  # noqa: E402
from factrl.train.verl.export import export_verl_parquet  # noqa: E402
from factrl.train.verl.reward import MODEL_TEXT_KEY, compute_score  # noqa: E402
from factrl.types import Claim, EvidenceRef, Passage  # noqa: E402

from _support import WordOverlapRetriever  # noqa: E402

PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_sentence_0", "nile_sentence_1"], sentences=["The Nile is long.", "It flows north."]),
]
CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORTS", dataset="toy",
              evidence=[EvidenceRef(id="nile_sentence_1", doc_id="nile")])
GOOD = [
    "<plan>Find where the Nile flows.</plan>\n<search>Nile flows north</search> and more text the stop cuts",
    "<think>The Nile flows north.</think>\n<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_1]]\n</answer>",
]


def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|user|>", "<|assistant|>", "<|end|>", "<|eos|>", "<|pad|>"])
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|eos|>", pad_token="<|pad|>")
    hf.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    return hf


class FakeServer:
    """verl's server_manager.generate contract: token ids in, TokenOutput out; stop
    strings and max_tokens honoured as vLLM does."""

    def __init__(self, tokenizer, turns):
        self.tok, self.turns, self.calls = tokenizer, turns, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "params": dict(sampling_params)})
        text = self.turns[min(len(self.calls) - 1, len(self.turns) - 1)]
        cut = [text.find(s) + len(s) for s in sampling_params.get("stop", []) if s in text]
        ids = self.tok.encode(text[: min(cut)] if cut else text, add_special_tokens=False)
        if not cut:
            ids.append(self.tok.eos_token_id)
        ids = ids[: sampling_params["max_tokens"]]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed", num_preempted=0,
                           extra_fields={"global_steps": 3})


def trainer_config(response_length=2048):
    return OmegaConf.create(
        {"actor_rollout_ref": {"rollout": {"name": "vllm", "prompt_length": 4096, "response_length": response_length}},
         "data": {}}
    )


def make_loop(server, tok, cfg, **kw):
    wrap = agent_loop_api.DictConfigWrap
    return FactrlEnvAgentLoop(trainer_config=wrap(cfg), server_manager=server, tokenizer=tok, processor=None,
                              dataset_cls=None, data_config=wrap(cfg.data), **kw)


@pytest.fixture()
def sample(tmp_path):
    out = tmp_path / "train.parquet"
    export_verl_parquet([CLAIM], out, split="train")
    row = pq.read_table(out).to_pylist()[0]
    # What verl's RLHFDataset hands an agent loop: the columns plus raw_prompt, index, ...
    return {**row, "raw_prompt": row.pop("prompt"), "index": 0, "tools_kwargs": {}, "interaction_kwargs": {}}


@pytest.fixture(autouse=True)
def in_memory_retriever(monkeypatch):
    monkeypatch.setattr(loop_mod, "shared_retriever", lambda **kw: WordOverlapRetriever(PASSAGES))


def run(server, tok, cfg, sample, params=None, **kw):
    async def main():
        loop = make_loop(server, tok, cfg, retriever_url="http://retriever.test", **kw)
        return await loop.run(params or {"temperature": 0.8, "top_p": 1.0, "logprobs": True}, **sample)

    return asyncio.run(main())


def test_registered_under_its_name():
    assert agent_loop_api._agent_loop_registry[AGENT_NAME] == {"_target_": "factrl.train.verl.agent_loop.FactrlEnvAgentLoop"}


def test_episode_tokens_masks_and_reward_through_verl(sample):
    tok = tiny_tokenizer()
    server = FakeServer(tok, GOOD)
    out = run(server, tok, trainer_config(), sample)
    assert isinstance(out, agent_loop_api.AgentLoopOutput)

    # The prompt is verl's chat-template rendering of the environment's (= the dataset's) prompt.
    messages = [{"role": m.role, "content": m.content} for m in VeriR1Env(WordOverlapRetriever([])).reset(CLAIM)]
    assert messages == [dict(m) for m in sample["raw_prompt"]]
    expected_prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"]
    assert out.prompt_ids == expected_prompt

    # Response = sampled ids (mask 1) | observation ids (mask 0) | sampled ids (mask 1).
    first = tok.encode(GOOD[0][: GOOD[0].index("</search>") + len("</search>")], add_special_tokens=False)
    second = tok.encode(GOOD[1], add_special_tokens=False)
    obs_len = len(out.response_ids) - len(first) - len(second)
    assert obs_len > 0
    obs_ids = out.response_ids[len(first): len(first) + obs_len]
    obs_text = tok.decode(obs_ids)
    assert obs_text.startswith("\n\n<information>\n[[nile_sentence_0]]") and obs_text.endswith("</information>\n\n")
    assert obs_ids == tok.encode(obs_text, add_special_tokens=False)
    assert out.response_ids == first + obs_ids + second
    assert out.response_mask == [1] * len(first) + [0] * obs_len + [1] * len(second)
    assert out.response_logprobs == [-0.5] * len(first) + [0.0] * obs_len + [-0.5] * len(second)
    assert out.num_turns == 4 and out.reward_score is None
    assert out.metrics.num_preempted == 0

    # Each generate call continues the exact ids so far, with the env's stop strings.
    assert [c["prompt_ids"] for c in server.calls] == [out.prompt_ids, out.prompt_ids + first + obs_ids]
    assert len({c["request_id"] for c in server.calls}) == 1
    params = server.calls[0]["params"]
    assert params["stop"] == ["</search>", "</answer>"] and params["include_stop_str_in_output"] is True
    assert params["max_tokens"] == 512 and params["temperature"] == 0.8 and params["logprobs"] is True
    assert server.calls[1]["params"]["max_tokens"] == 512

    # The reward function sees the model's own text (verl merges extra_fields into extra_info)
    # and, without it, scores the decoded response alike.
    assert out.extra_fields[MODEL_TEXT_KEY] == tok.decode(first) + GOOD[1]
    assert out.extra_fields["global_steps"] == 3 and out.extra_fields["factrl_error"] == ""
    assert out.extra_fields["factrl_prompt_mismatch"] is False
    truth = sample["reward_model"]["ground_truth"]
    decoded = tok.decode(out.response_ids, skip_special_tokens=True)
    with_text = compute_score("toy", decoded, truth, {**sample["extra_info"], **out.extra_fields})
    without = compute_score("toy", decoded, truth, sample["extra_info"])
    assert with_text["score"] == without["score"] == 4.0

    # verl turns the output into tensors for its batch.
    tensors = out.as_dict()
    assert tensors["responses"].tolist() == out.response_ids
    assert tensors["response_mask"].tolist() == out.response_mask


def test_score_in_loop_and_response_budget(sample):
    tok = tiny_tokenizer()
    out = run(FakeServer(tok, GOOD), tok, trainer_config(), sample, score_in_loop=True)
    assert out.reward_score == 4.0
    assert out.extra_fields["reward_extra_info"] == {"score": 4.0, "format": 1.0, "evidence": 1.0, "label": 2.0,
                                                      "validity": 1.0, "hit_rate": 1.0}
    # A short response_length: the first turn is budgeted to fit, the observation is cut.
    server = FakeServer(tok, GOOD)
    out = run(server, tok, trainer_config(response_length=80), sample, score_in_loop=True)
    assert len(out.response_ids) == len(out.response_mask) == 80
    assert len(server.calls) == 1 and server.calls[0]["params"]["max_tokens"] == 80
    assert out.reward_score == 0.0


def test_prompt_mismatch_is_flagged_and_the_environment_wins(sample):
    tok = tiny_tokenizer()
    sample = {**sample, "raw_prompt": [{"role": "user", "content": "a different prompt"}]}
    out = run(FakeServer(tok, GOOD), tok, trainer_config(), sample)
    assert out.extra_fields["factrl_prompt_mismatch"] is True
    messages = [{"role": m.role, "content": m.content} for m in VeriR1Env(WordOverlapRetriever([])).reset(CLAIM)]
    assert out.prompt_ids == tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"]


def test_the_example_yaml_instantiates_like_verl_does(monkeypatch):
    import hydra

    monkeypatch.setenv("FACTRL_RETRIEVER_URL", "http://10.0.0.5:8000")
    (entry,) = OmegaConf.load(EXAMPLES_DIR / "agent_loop.yaml")
    assert entry.name == AGENT_NAME
    tok, cfg = tiny_tokenizer(), trainer_config()
    wrap = agent_loop_api.DictConfigWrap

    async def main():
        return hydra.utils.instantiate(config=entry, trainer_config=wrap(cfg), server_manager=None, tokenizer=tok,
                                       processor=None, hf_model_type=None, dataset_cls=None, data_config=wrap(cfg.data),
                                       tools=agent_loop_api.ToolListWrap([]))

    loop = asyncio.run(main())
    assert isinstance(loop, FactrlEnvAgentLoop)
    assert loop.retriever_url == "http://10.0.0.5:8000" and loop.env_kwargs == {"max_searches": 3, "top_k": 3}
    assert loop.budget.max_turn_tokens == 512 and loop.budget.max_response_tokens == 2048


def test_sglang_without_a_tokenizer_is_refused():
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": "sglang", "prompt_length": 64, "response_length": 64,
                                                              "skip_tokenizer_init": True}}, "data": {}})

    async def main():
        return make_loop(None, tiny_tokenizer(), cfg, retriever_url="http://retriever.test")

    with pytest.raises(ValueError, match="skip_tokenizer_init=False"):
        asyncio.run(main())


def test_stop_params_per_backend():
    assert stop_params("sglang", ("</search>",)) == {"stop": ["</search>"], "no_stop_trim": True}
    assert stop_params("vllm", ("</a>",)) == {"stop": ["</a>"], "include_stop_str_in_output": True}


def test_offline_rows_need_the_offline_environment(tmp_path):
    extra = [EvidenceRef(id="nile_sentence_0", doc_id="nile", text="The Nile is long.")]
    claim = CLAIM.model_copy(update={"evidence": [EvidenceRef(id="nile_sentence_1", doc_id="nile", text="It flows north.")]})
    export_verl_parquet([claim], tmp_path / "off.parquet", env_kwargs={"mode": "offline"}, split="train", context=lambda c: extra)
    row = pq.read_table(tmp_path / "off.parquet").to_pylist()[0]
    sample = {**row, "raw_prompt": row.pop("prompt"), "index": 0}
    tok = tiny_tokenizer()
    with pytest.raises(ValueError, match="exported for offline.*veri_r1_offline"):
        run(FakeServer(tok, GOOD), tok, trainer_config(), sample)

    answer = "<think>It flows north.</think>\n" + GOOD[1].split("\n", 1)[1]
    server = FakeServer(tok, [answer])

    async def main():
        loop = make_loop(server, tok, trainer_config(), env="veri_r1_offline")
        return await loop.run({"temperature": 0.8, "logprobs": True}, **sample)

    out = asyncio.run(main())
    assert out.extra_fields["factrl_prompt_mismatch"] is False  # the stored context rebuilt the prompt
    assert len(server.calls) == 1 and out.num_turns == 2
    assert out.response_mask == [1] * len(out.response_ids)
    score = compute_score("toy", tok.decode(out.response_ids), sample["reward_model"]["ground_truth"],
                          {**sample["extra_info"], **out.extra_fields})
    assert score["score"] == 4.0
