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
    offline = run_episodes(lambda: VeriR1Env(None, VeriR1Config(mode="offline")), CLAIMS, TemplateTeacher(CLAIMS))
    assert all(t.verdict.format_ok for t in offline), [t.verdict.format_errors for t in offline]
    assert [t.claim_id for t in select_correct(offline)] == ["s", "r", "n"]
    online = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), CLAIMS, TemplateTeacher(CLAIMS))
    assert all(t.verdict.format_ok for t in online), [t.verdict.format_errors for t in online]
    assert [t.claim_id for t in select_correct(online)] == ["s", "r", "n"]
    assert online[0].searches == ["The Nile flows north."]
