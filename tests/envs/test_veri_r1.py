import pytest

from factrl.envs.veri_r1 import VeriR1Config, VeriR1Env, parse_verdict, render_information
from factrl.labels import Label
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, EvidenceRef, Hit, Passage

from _support import WordOverlapRetriever

PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_sentence_0", "nile_sentence_1"], sentences=["The Nile is long.", "It flows north."]),
    Passage(id="amazon#0", doc_id="amazon", title="Amazon", text="The Amazon carries the most water.",
            sentence_ids=["amazon_sentence_0"], sentences=["The Amazon carries the most water."]),
]


class FailingRetriever:
    def search(self, queries, k):
        raise TimeoutError("retrieval server timed out")


CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORTS",
              evidence=[EvidenceRef(id="nile_sentence_1", doc_id="nile", text="It flows north.")])


def script(turns):
    """A responder that plays ``turns`` in order, one per generate call for this episode."""
    def respond(context: str) -> str:
        n = context.count("<information>") - 1  # the prompt shows one example block
        n = max(n, 0) + context.count("No searches left")
        return turns[min(n, len(turns) - 1)]
    return respond


GOOD = [
    "<plan>Find where the Nile flows.</plan>\n<search>Nile flows north</search>",
    "<think>The Nile flows north.</think>\n<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_1]]\n</answer>",
]


def test_render_information_lists_sentence_ids():
    text, shown = render_information([Hit(passage=PASSAGES[0], score=1.0)], max_chars=1000)
    assert text.splitlines() == ["[[nile_sentence_0]]: Nile — The Nile is long.", "[[nile_sentence_1]]: It flows north."]
    assert shown == ["nile_sentence_0", "nile_sentence_1"]
    short, shown = render_information([Hit(passage=PASSAGES[0], score=1.0)], max_chars=50)
    assert shown == ["nile_sentence_0"] and len(short) <= 50


def test_online_episode_end_to_end():
    retriever = WordOverlapRetriever(PASSAGES)
    lm = ScriptedLM(script(GOOD))
    (traj,) = run_episodes(lambda: VeriR1Env(retriever), [CLAIM], lm, RolloutConfig(temperature=0))
    assert traj.error is None
    assert retriever.queries == ["Nile flows north"]
    assert [t.source for t in traj.turns] == ["model", "env", "model"]
    assert traj.turns[1].text.startswith("\n\n<information>\n[[nile_sentence_0]]")
    assert traj.verdict.format_ok, traj.verdict.format_errors
    assert traj.verdict.label is Label.SUPPORT
    assert traj.verdict.evidence_ids == ["nile_sentence_1"]
    assert traj.searches == ["Nile flows north"]
    assert "nile_sentence_1" in traj.retrieved_ids
    # Reward per Veri-R1 §2.3: label 2 * validity 1 + IoU 1 + format 1.
    assert traj.reward.total == pytest.approx(4.0)


def test_token_truth_and_mask():
    lm = ScriptedLM(script(GOOD))
    (traj,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM], lm)
    ids, mask = traj.completion_ids, traj.completion_mask
    assert len(ids) == len(mask)
    model_ids = [i for i, m in zip(ids, mask) if m == 1]
    env_ids = [i for i, m in zip(ids, mask) if m == 0]
    # The model's tokens are exactly what it produced, turn by turn; the env's tokens are
    # exactly the encoded observation.
    assert lm.decode(model_ids) == GOOD[0] + GOOD[1]
    assert lm.decode(env_ids) == traj.turns[1].text
    for turn in traj.turns:
        assert turn.mask == [1 if turn.source == "model" else 0] * len(turn.token_ids)
        assert (turn.logprobs is not None) == (turn.source == "model")
    assert traj.prompt_ids == lm.chat_prompt_ids(traj.prompt)


def test_search_budget_and_forced_answer():
    turns = ["<plan>p</plan><search>Nile</search>"] * 3 + [
        "<search>Amazon</search>",
        "<answer>Label: SUPPORT\nEvidence: [[nile_sentence_1]]</answer>",
    ]
    lm = ScriptedLM(script(turns))
    env_box = []

    def make():
        env_box.append(VeriR1Env(WordOverlapRetriever(PASSAGES)))
        return env_box[-1]

    (traj,) = run_episodes(make, [CLAIM], lm)
    env_turns = [t.text for t in traj.turns if t.source == "env"]
    assert len(traj.searches) <= 4
    assert "search budget is spent" in env_turns[2]
    # The 4th turn is the last allowed (max_turns=4): the episode ends without an answer.
    assert sum(t.source == "model" for t in traj.turns) == 4
    assert not traj.verdict.format_ok


def test_model_ignoring_format_is_a_recorded_failure():
    lm = ScriptedLM(lambda ctx: "The claim is true because rivers flow.")
    (traj,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM], lm)
    assert traj.error is None
    assert traj.verdict.label is None and not traj.verdict.format_ok
    assert traj.verdict.format_errors
    assert traj.reward.components["format"] == 0.0 and traj.reward.total == 0.0


def test_empty_claim_and_failing_retriever_are_recorded():
    lm = ScriptedLM(script(GOOD))
    bad = Claim(id="empty", text="   ", label="SUPPORT")
    trajs = run_episodes(lambda: VeriR1Env(FailingRetriever()), [bad, CLAIM], lm)
    assert "empty text" in trajs[0].error
    assert "timed out" in trajs[1].error
    assert trajs[1].verdict.label is None


def test_offline_mode_shows_evidence_and_forbids_search():
    env = VeriR1Env(None, VeriR1Config(mode="offline"), context=lambda c: [EvidenceRef(id="nile_sentence_0", text="The Nile is long.")])
    msgs = env.reset(CLAIM)
    assert "[[nile_sentence_1]]: It flows north." in msgs[0].content
    assert "[[nile_sentence_0]]: The Nile is long." in msgs[0].content
    step = env.step("<think>t</think><answer>Label: SUPPORT\nEvidence: [[nile_sentence_1]]</answer>")
    assert step.done
    assert env.result().verdict.format_ok
    v = parse_verdict("<search>x</search><answer>Label: SUPPORT\nEvidence: </answer>", online=False, max_searches=3)
    assert not v.format_ok and any("undeclared tag <search>" in e for e in v.format_errors)


def test_offline_needs_evidence_text():
    env = VeriR1Env(None, VeriR1Config(mode="offline"))
    with pytest.raises(ValueError, match="needs evidence text"):
        env.reset(Claim(id="x", text="c", evidence=[EvidenceRef(id="a")]))


def test_group_rollouts_are_adjacent_and_indexed():
    lm = ScriptedLM(script(GOOD))
    claims = [CLAIM, CLAIM.model_copy(update={"id": "c2"})]
    trajs = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), claims, lm, RolloutConfig(group=3, batch_size=4))
    assert [(t.claim_id, t.group_index) for t in trajs] == [("c1", 0), ("c1", 1), ("c1", 2), ("c2", 0), ("c2", 1), ("c2", 2)]


def test_document_context_gives_cited_documents_capped():
    from factrl.envs.context import document_context

    many = [Passage(id=f"d#{j}", doc_id="d", text="x", sentence_ids=[f"d_sentence_{3*j+i}" for i in range(3)],
                    sentences=[f"s{3*j+i}" for i in range(3)]) for j in range(4)]
    provide = document_context(PASSAGES + many, max_sentences=5)
    claim = Claim(id="x", text="t", meta={"cited_doc_ids": ["d", "nile"]})
    assert [e.id for e in provide(claim)] == [f"d_sentence_{i}" for i in range(5)]
    assert [e.id for e in document_context(PASSAGES)(CLAIM)] == ["nile_sentence_0", "nile_sentence_1"]


def test_parse_verdict_says_whether_an_answer_block_was_found():
    assert not parse_verdict("<plan>p</plan><search>q</search>", online=True, max_searches=3).answered
    assert not parse_verdict("free text only", online=False, max_searches=3).answered
    # An <answer> whose label does not parse still counts as answered
    v = parse_verdict("<think>t</think><answer>Label: maybe\nEvidence: [[a]]</answer>", online=False, max_searches=3)
    assert v.answered and v.label is None and v.evidence_ids == ["a"]


def test_nei_claim_without_an_answer_gets_no_reward():
    nei = Claim(id="n1", text="The Nile is purple.", label="NEI")
    lm = ScriptedLM(lambda ctx: "I am not sure.")
    (traj,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [nei], lm)
    assert not traj.verdict.answered
    assert traj.reward.components["evidence"] == 0.0 and traj.reward.total == 0.0


def test_short_prompt_keeps_the_protocol_and_a_bad_name_is_refused():
    from factrl.envs import prompts

    env = VeriR1Env(WordOverlapRetriever(PASSAGES), VeriR1Config(prompt="short", max_searches=2))
    (msg,) = env.reset(CLAIM)
    text = msg.content
    assert text.endswith(f"Claim: {CLAIM.text}\n") and "at most two times" in text
    for tag in ("<plan>", "<search>", "<think>", "<answer>", "SUPPORT", "REFUTE", "NOT ENOUGH INFO"):
        assert tag in text
    assert len(text) < len(prompts.VERI_R1_ONLINE) / 2
    step = env.step("<plan>p</plan>\n<search>Nile flows</search>")
    assert "[[nile_sentence_1]]" in step.observation
    env.step("<think>t</think>\n<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_1]]\n</answer>")
    assert env.result().verdict.format_ok
    off = VeriR1Env(None, VeriR1Config(mode="offline", prompt="short"),
                    context=lambda c: [EvidenceRef(id="nile_sentence_1", text="It flows north.")])
    (msg,) = off.reset(CLAIM)
    assert "[[nile_sentence_1]]: It flows north." in msg.content and "<search>" not in msg.content
    with pytest.raises(ValueError, match="prompt must be one of"):
        VeriR1Config(prompt="tiny")


def test_every_information_is_followed_by_think():
    # The paper's prompt: "conduct reasoning inside <think> first every time you get new
    # information"; the system inserts <information> after each </search>.
    def errors(text: str) -> list[str]:
        return parse_verdict(text, online=True, max_searches=3).format_errors

    answer = "<answer>\nLabel: SUPPORT\nEvidence: [[a]]\n</answer>"
    assert errors("<plan>p</plan><search>q</search><think>t</think>" + answer) == []
    assert errors("<plan>p</plan><search>q</search>" + answer) == [
        "no <think> after the information of search 1 (got <answer>)"]
    assert errors("<plan>p</plan><search>q</search><think>t</think><search>r</search><search>s</search>"
                  "<think>t</think>" + answer) == ["no <think> after the information of search 2 (got <search>)"]
    # Offline there is no search, so no rule to break.
    assert parse_verdict("<think>t</think>" + answer, online=False, max_searches=3).format_ok
    # An episode that skips the reasoning loses the format reward.
    skip = ["<plan>Find where the Nile flows.</plan>\n<search>Nile flows north</search>",
            "<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_1]]\n</answer>"]
    (traj,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM], ScriptedLM(script(skip)))
    assert not traj.verdict.format_ok and traj.reward.total == 3.0
    (traj,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM], ScriptedLM(script(GOOD)))
    assert traj.verdict.format_ok and traj.reward.total == 4.0


def test_offline_lines_show_as_many_lines_with_or_without_gold_evidence():
    import re

    doc = [EvidenceRef(id=f"d_sentence_{i}", doc_id="d", text=f"Fact {i}.") for i in range(5)]
    supported = Claim(id="s", text="c", label="SUPPORT", evidence=[doc[4]])
    no_gold = Claim(id="n", text="c", label="NOT ENOUGH INFO")

    def lines(config: VeriR1Config, claim: Claim) -> list[str]:
        env = VeriR1Env(None, config, context=lambda c: doc[:3])
        return re.findall(r"\[\[(d_sentence_\d)\]\]:", env.reset(claim)[0].content)

    plain = VeriR1Config(mode="offline")
    assert len(lines(plain, supported)) == 4 and len(lines(plain, no_gold)) == 3  # the count tells the label
    fixed = VeriR1Config(mode="offline", offline_lines=3)
    assert len(lines(fixed, supported)) == 3 and len(lines(fixed, no_gold)) == 3
    assert "d_sentence_4" in lines(fixed, supported)  # the gold sentence is never the one dropped
    with pytest.raises(ValueError, match="offline_lines"):
        VeriR1Config(mode="offline", offline_lines=0)
