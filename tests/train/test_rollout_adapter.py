import pytest

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


# -- every context the policy generated in is a completion (ProFact's search contexts) ----
def _profact_trajectories(max_questions=3):
    from factrl.envs import EnvDeps, EnvSpec, build
    from factrl.train.profact_teacher import ProFactTeacher

    from train.test_profact_teacher import CLAIM, PASSAGES

    teacher = ProFactTeacher([CLAIM], max_questions=max_questions)
    spec = EnvSpec(name="profact", params={"max_questions": max_questions})
    make_env = lambda: build(spec, EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))  # noqa: E731
    return run_episodes(make_env, [CLAIM, CLAIM], teacher, RolloutConfig(group=1)), teacher, make_env


def test_every_policy_context_is_a_completion_with_its_own_mask():
    from factrl.train.rollout_adapter import contexts_per_trajectory, trained_roles

    trajs, lm, make_env = _profact_trajectories(max_questions=3)
    rows = contexts_per_trajectory(make_env())
    assert rows == 4 and trained_roles(make_env()) == {"search"}  # the opening context + at most 3 searches
    reward = build_reward("profact")
    trajs = [t.model_copy(update={"reward": reward(t)}) for t in trajs]
    out = trajectories_to_trl(trajs, eos_token_id=EOS, reward=reward, rows_per_trajectory=rows, roles={"search"})
    assert len(out["completion_ids"]) == len(trajs) * rows
    for n, t in enumerate(trajs):
        contexts = [(t.prompt_ids, t.turns)] + [(s.prompt_ids, s.turns) for s in t.segments]
        assert len(t.segments) == 3  # the teacher asks three questions, each searched in its own context
        for r, (prompt, turns) in enumerate(contexts):
            i = n * rows + r
            ids, mask, lps = out["completion_ids"][i], out["env_mask"][i], out["logprobs"][i]
            assert out["prompt_ids"][i] == prompt
            assert ids == [x for turn in turns for x in turn.token_ids] + [EOS] and len(lps) == len(ids)
            # every sampled token of the context has mask 1, every inserted one mask 0
            want = [m for turn in turns for m in ([1] * len(turn.token_ids) if turn.source == "model"
                                                    else [0] * len(turn.token_ids))]
            assert mask == want + [0]
            model = lm.decode([x for x, m in zip(ids, mask) if m])
            assert model == "".join(turn.text for turn in turns if turn.source == "model")
            assert lm.decode([x for x, m in zip(ids, mask) if not m]) == "".join(
                turn.text for turn in turns if turn.source == "env")
        # the search contexts hold the queries and answers the QA reward scores
        assert lm.decode(out["completion_ids"][n * rows + 1]).startswith("<search>")
        assert all(out[col][n * rows:(n + 1) * rows] == [out[col][n * rows]] * rows for col in reward_columns(reward))
        assert out["reward_total"][n * rows] == t.reward.total


def test_short_trajectories_are_padded_and_frozen_roles_are_not_trained():
    from factrl.train.rollout_adapter import contexts_per_trajectory, trained_roles, trajectory_rows

    trajs, _, make_env = _profact_trajectories(max_questions=2)
    rows = trajectory_rows(trajs[0], EOS, rows=5, roles={"search"})
    pad = ([EOS], [EOS], [0], [0.0], [0])
    assert len(rows) == 5 and rows[3:] == [pad] * 2  # opening + 2 searches + 2 pads
    # a role played by another (frozen) LM, or one the environment did not declare, is not trained
    assert trajectory_rows(trajs[0], EOS, rows=1) == rows[:1]
    assert contexts_per_trajectory(make_env(), {"search": object()}) == 1
    assert trained_roles(make_env(), {"search": object()}) == frozenset()
    with pytest.raises(RuntimeError, match="more than the 2 rows per trajectory"):
        trajectory_rows(trajs[0], EOS, rows=2, roles={"search"})
    failed = trajs[0].model_copy(update={"prompt_ids": [], "segments": []})
    assert trajectory_rows(failed, EOS, rows=3, roles={"search"}) == [pad] * 3
    # Veri-R1 opens no further context: one row per episode, as before
    assert contexts_per_trajectory(VeriR1Env(WordOverlapRetriever(PASSAGES))) == 1


def test_rows_of_one_episode_are_consecutive_copies_of_its_prompt():
    from factrl.train.config import grpo_args, load_run_config
    from factrl.train.rollout_adapter import _episode_starts

    a, b = CLAIM, Claim(id="c2", text="Other.", label="REFUTE")
    assert _episode_starts([a] * 8 + [b] * 8, 4) == [a, a, b, b]  # G = 2 episodes of 4 rows each
    with pytest.raises(ValueError, match="runs of 4"):
        _episode_starts([a, a, b, b, a, a, b, b], 4)
    args = grpo_args(load_run_config("profact"), rows_per_trajectory=6)
    assert args["num_generations"] == 8 * 6 and args["gradient_accumulation_steps"] == 32 * 8 * 6 // 4


def test_last_turn_only_trains_only_the_final_model_turn():
    lm = ScriptedLM(respond)
    trajs = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM], lm, RolloutConfig(group=1))
    full = trajectories_to_trl(trajs, eos_token_id=EOS, reward=VERI_R1, keep_inserted=True)
    last = trajectories_to_trl(trajs, eos_token_id=EOS, reward=VERI_R1, keep_inserted=True, last_turn_only=True)
    turns = trajs[0].turns
    model_turns = [t for t in turns if t.source == "model"]
    assert len(model_turns) >= 2
    assert last["completion_ids"] == full["completion_ids"] and last["logprobs"] == full["logprobs"]
    trained = lm.decode([x for x, m in zip(last["completion_ids"][0], last["env_mask"][0]) if m])
    assert trained == model_turns[-1].text
    # the earlier model turns stay model tokens (not "inserted") for the invert_mask control
    assert last["_inserted"] == full["_inserted"]


def test_trained_turns_setting_is_checked_at_load():
    from factrl.train.config import load_run_config

    with pytest.raises(ValueError, match="trained_turns"):
        load_run_config("haris_factworld_cpu", {"grpo.trained_turns": "first"})
    with pytest.raises(ValueError, match="haris.reasoner_trained_turns"):
        load_run_config("haris_factworld_cpu", {"haris.reasoner_trained_turns": "some"})
    assert load_run_config("haris_factworld_cpu", {"haris.reasoner_trained_turns": "last"}).haris.reasoner_trained_turns == "last"
