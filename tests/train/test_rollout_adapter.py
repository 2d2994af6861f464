from factrl.envs.veri_r1 import VeriR1Env
from factrl.lm.scripted import EOS, ScriptedLM
from factrl.rollout import RolloutConfig, run_episodes
from factrl.rewards import build_reward
from factrl.train.rollout_adapter import reward_columns, reward_functions, trajectories_to_trl

VERI_R1 = build_reward("veri_r1")
REWARD_COLUMNS = reward_columns(VERI_R1)
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [Passage(id="nile#0", doc_id="nile", title="Nile", text="It flows north.",
                    sentence_ids=["nile_sentence_0"], sentences=["It flows north."])]
CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORT", evidence=[EvidenceRef(id="nile_sentence_0")])


def respond(ctx):
    if ctx.count("<information>") < 2:
        return "<plan>p</plan><search>Nile north</search>"
    return "<think>t</think><answer>Label: SUPPORT\nEvidence: [[nile_sentence_0]]</answer>"


def test_trl_dict_keeps_token_truth_and_masks():
    lm = ScriptedLM(respond)
    trajs = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM, CLAIM], lm, RolloutConfig(group=1))
    out = trajectories_to_trl(trajs, eos_token_id=EOS, reward=VERI_R1)
    for i, t in enumerate(trajs):
        ids, mask, lps = out["completion_ids"][i], out["env_mask"][i], out["logprobs"][i]
        assert out["prompt_ids"][i] == t.prompt_ids
        # Concatenated ids are exactly the generated + observation ids, then one EOS
        # (mask 0: the model did not sample it) because the episode ended with an answer.
        assert ids == t.completion_ids + [EOS]
        assert mask == t.completion_mask + [0]
        assert len(lps) == len(ids)
        model_text = lm.decode([x for x, m in zip(ids, mask) if m])
        assert model_text == t.model_text
        env_text = lm.decode([x for x, m in zip(ids, mask) if not m])
        assert env_text == "".join(x.text for x in t.turns if x.source == "env")
    assert out["reward_total"] == [4.0, 4.0]
    assert out["reward_label"] == [2.0, 2.0] and out["reward_format"] == [1.0, 1.0]
    assert out["label_correct"] == [1.0, 1.0]


def test_truncated_episode_gets_no_eos_and_failed_reset_a_dummy():
    lm = ScriptedLM(lambda ctx: "<plan>" + "x" * 100)
    trajs = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM, Claim(id="e", text=" ", label="SUPPORT")],
                         lm, RolloutConfig(max_new_tokens=20))
    out = trajectories_to_trl(trajs, eos_token_id=EOS, reward=VERI_R1)
    assert out["completion_ids"][0][-1] != EOS and len(out["completion_ids"][0]) == 20
    assert out["completion_ids"][1] == [EOS] and out["env_mask"][1] == [0]
    assert out["reward_total"][1] == 0.0


def test_reward_functions_read_columns_and_weight_only_the_total():
    funcs, weights = reward_functions(VERI_R1)
    assert [f.__name__ for f in funcs] == list(REWARD_COLUMNS)
    assert weights[0] == 1.0 and sum(weights) == 1.0
    assert funcs[1](["a", "b"], reward_label=[2, 0], reward_total=[1, 1]) == [2.0, 0.0]


def test_columns_carry_the_curves_the_paper_plots():
    """Evidence cover rate and verification accuracy per rollout (Veri-R1 §4.2, Figure 4)."""
    def half(ctx):  # cites nothing: label right, evidence not covered, not verified
        if ctx.count("<information>") < 2:
            return "<plan>p</plan><search>Nile north</search>"
        return "<think>t</think><answer>Label: SUPPORT\nEvidence: </answer>"

    good = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM], ScriptedLM(respond))
    bad = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM], ScriptedLM(half))
    out = trajectories_to_trl(good + bad, eos_token_id=EOS, reward=VERI_R1)
    assert {"evidence_cover", "verified", "label_correct"} <= set(REWARD_COLUMNS)
    assert out["evidence_cover"] == [1.0, 0.0] and out["verified"] == [1.0, 0.0]
    assert out["label_correct"] == [1.0, 1.0]
