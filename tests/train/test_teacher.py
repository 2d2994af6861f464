from factrl.envs.veri_r1 import VeriR1Config, VeriR1Env
from factrl.rollout import run_episodes
from factrl.train.sft import select_correct
from factrl.train.teacher import TemplateTeacher
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_sentence_0", "nile_sentence_1"], sentences=["The Nile is long.", "It flows north."]),
    Passage(id="amazon#0", doc_id="amazon", title="Amazon", text="The Amazon carries the most water.",
            sentence_ids=["amazon_sentence_0"], sentences=["The Amazon carries the most water."]),
]
CLAIMS = [
    Claim(id="s", text="The Nile flows north.", label="SUPPORT", evidence=[EvidenceRef(id="nile_sentence_1", text="It flows north.")]),
    Claim(id="r", text="The Amazon carries little water.", label="REFUTE",
          evidence=[EvidenceRef(id="amazon_sentence_0", text="The Amazon carries the most water.")]),
    Claim(id="n", text="The Nile has many crocodiles.", label="NEI"),
]


def test_teacher_trajectories_are_protocol_perfect_offline_and_online():
    offline = run_episodes(lambda: VeriR1Env(None, VeriR1Config(mode="offline")), CLAIMS,
                           TemplateTeacher(CLAIMS, online=False))
    assert all(t.verdict.format_ok for t in offline), [t.verdict.format_errors for t in offline]
    assert [t.claim_id for t in select_correct(offline)] == ["s", "r", "n"]
    online = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), CLAIMS, TemplateTeacher(CLAIMS, online=True))
    assert all(t.verdict.format_ok for t in online), [t.verdict.format_errors for t in online]
    assert [t.claim_id for t in select_correct(online)] == ["s", "r", "n"]
    assert online[0].searches == ["The Nile flows north."]


def test_quoting_teacher_cites_the_sentence_and_never_searches_with_gold_text():
    teacher = TemplateTeacher(CLAIMS, online=False, quote=True, quote_words=3, gold_requery=False)
    offline = run_episodes(lambda: VeriR1Env(None, VeriR1Config(mode="offline")), CLAIMS, teacher)
    assert [t.claim_id for t in select_correct(offline)] == ["s", "r", "n"]
    s_text = offline[0].turns[0].text
    assert '[[nile_sentence_1]] says: "It flows north."' in s_text and "supports" in s_text
    r_text = offline[1].turns[0].text
    assert '[[amazon_sentence_0]] says: "The Amazon carries …"' in r_text and "refutes" in r_text
    # Online, one search with the claim; a miss is answered honestly (NEI), not re-searched
    # with the gold sentence, and so is not a fully correct trajectory.
    miss = Claim(id="m", text="Crocodiles live in it.", label="SUPPORT",
                 evidence=[EvidenceRef(id="amazon_sentence_0", text="The Amazon carries the most water.")])
    claims = [*CLAIMS, miss]
    online = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), claims,
                          TemplateTeacher(claims, online=True, quote=True, gold_requery=False))
    assert all(t.verdict.format_ok for t in online)
    assert all(len(t.searches) == 1 for t in online)
    assert online[3].verdict.label.value == "NOT ENOUGH INFO"
    assert "m" not in [t.claim_id for t in select_correct(online)]


def test_teacher_follows_the_short_prompt_in_both_settings():
    short = lambda **kw: VeriR1Config(prompt="short", **kw)  # noqa: E731
    offline = run_episodes(lambda: VeriR1Env(None, short(mode="offline")), CLAIMS,
                           TemplateTeacher(CLAIMS, online=False, quote=True))
    assert [t.claim_id for t in select_correct(offline)] == ["s", "r", "n"]
    assert all(not t.searches for t in offline)
    online = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES), short()), CLAIMS,
                          TemplateTeacher(CLAIMS, online=True, quote=True, gold_requery=False))
    assert [t.claim_id for t in select_correct(online)] == ["s", "r", "n"]
    assert all(len(t.searches) == 1 and t.turns[0].text.startswith("<plan>") for t in online)
