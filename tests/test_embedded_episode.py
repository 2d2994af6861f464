"""A short real Veri-R1 episode: the embedded SmolLM2 searching a real BM25 index over
the bundled demo corpus."""

from importlib.resources import files
from pathlib import Path

import pytest

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory):
    from factrl.retrieval.index import build_index

    corpus = Path(str(files("factrl.demo") / "corpus.jsonl"))
    return build_index(corpus, tmp_path_factory.mktemp("idx") / "demo", progress=False)


def test_embedded_model_runs_a_veri_r1_episode(demo_index):
    from factrl.datasets import load_dataset
    from factrl.envs.veri_r1 import VeriR1Env
    from factrl.lm.loader import load_lm
    from factrl.rollout import RolloutConfig, run_episodes

    claims = load_dataset("jsonl", Path(str(files("factrl.demo") / "claims.jsonl")), "demo").claims[:2]
    lm = load_lm("smollm2")
    trajs = run_episodes(lambda: VeriR1Env(demo_index), claims, lm,
                         RolloutConfig(temperature=0.0, max_new_tokens=48, batch_size=2))
    assert len(trajs) == 2
    for t in trajs:
        assert t.error is None
        assert t.prompt_ids == lm.chat_prompt_ids(t.prompt)
        model_turns = [x for x in t.turns if x.source == "model"]
        assert 1 <= len(model_turns) <= 4
        for turn in model_turns:
            # token truth: the text is the decoding of exactly the sampled ids
            assert turn.text == lm.decode(turn.token_ids)
            assert len(turn.logprobs) == len(turn.token_ids) and all(lp <= 0 for lp in turn.logprobs)
        # Whatever the small model wrote, the verdict and reward were recorded.
        assert set(t.reward.components) >= {"format", "evidence", "label", "validity"}
        assert t.verdict.format_ok or t.verdict.format_errors
        for turn in t.turns:
            if turn.source == "env":
                assert turn.text.lstrip().startswith("<information>")
                assert all(m == 0 for m in turn.mask)
