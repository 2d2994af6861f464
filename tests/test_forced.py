"""Forced verdicts: the label the model finds most probable after "<answer> Label:", the
evidence it then writes (only ids the episode showed), marked forced and never format-ok."""

from factrl.forced import ANSWER_OPENING, FORCED_ERROR, force_answers
from factrl.protocol.forcing import VERI_R1_FORCING
from factrl.labels import Label
from factrl.lm.base import Generation
from factrl.types import Claim, Message, Trajectory, Turn, Verdict


class CharLM:
    """A token-level LM over characters: scores each label by a fixed table and writes a
    fixed evidence line, recording what it was asked."""

    eos_token_id = 0

    def __init__(self, label_logprob: dict[str, float], evidence: str) -> None:
        self.label_logprob = label_logprob
        self.evidence = evidence
        self.scored: list[tuple[list[int], list[int]]] = []
        self.prompts: list[list[int]] = []

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids) -> str:
        return "".join(chr(i) for i in ids)

    def score(self, prompts, continuations):
        self.scored += list(zip(prompts, continuations))
        return [self.label_logprob[self.decode(c).strip()] for c in continuations]

    def generate(self, prompts, config):
        self.prompts += [list(p) for p in prompts]
        ids = self.encode(self.evidence)
        return [Generation(token_ids=ids, logprobs=None, text=self.evidence, finish_reason="stop") for _ in prompts]


def _traj(cid: str, *, answered: bool = False, error: str | None = None) -> Trajectory:
    enc = lambda s: [ord(c) for c in s]  # noqa: E731
    turns = [Turn(source="model", text="<plan>p</plan><search>q</search>", token_ids=enc("<plan>p</plan><search>q</search>"),
                  mask=[1] * 32),
             Turn(source="env", text="<information>[[a]]: x</information>", token_ids=enc("<information>[[a]]: x</information>"),
                  mask=[0] * 36)]
    verdict = (Verdict(label=Label.SUPPORT, evidence_ids=["a"], format_ok=True, answered=True) if answered
               else Verdict(format_errors=["no <answer>"]))
    return Trajectory(claim_id=cid, env="veri_r1", claim=Claim(id=cid, text="c", label=Label.REFUTE),
                      prompt=[Message(role="user", content="P")], prompt_ids=enc("P"), turns=turns,
                      verdict=verdict, retrieved_ids=["a", "b"], error=error)


def test_the_most_probable_label_and_only_shown_evidence():
    lm = CharLM({"SUPPORT": -3.0, "REFUTE": -0.5, "NOT ENOUGH INFO": -2.0}, " [[a]], [[zzz]]\n</answer>")
    (v,) = force_answers([_traj("1")], lm, VERI_R1_FORCING)
    assert v.label is Label.REFUTE and v.forced and v.answered
    assert v.evidence_ids == ["a"]  # "zzz" was never shown
    assert not v.format_ok and v.format_errors == ["no <answer>", FORCED_ERROR]
    # Scored on the episode's own token stream followed by the answer opening.
    context = lm.decode(lm.scored[0][0])
    assert context == "P<plan>p</plan><search>q</search><information>[[a]]: x</information>" + ANSWER_OPENING
    assert lm.decode(lm.prompts[0]).endswith(ANSWER_OPENING + " REFUTE\nEvidence:")


def test_not_enough_info_cites_nothing():
    lm = CharLM({"SUPPORT": -3.0, "REFUTE": -2.5, "NOT ENOUGH INFO": -0.1}, " [[a]]")
    (v,) = force_answers([_traj("1")], lm, VERI_R1_FORCING)
    assert v.label is Label.NEI and v.evidence_ids == []


def test_answered_failed_and_text_level_episodes_are_left_alone():
    lm = CharLM({"SUPPORT": -1.0, "REFUTE": -2.0, "NOT ENOUGH INFO": -3.0}, " [[b]]")
    no_label = _traj("5")
    no_label.verdict = Verdict(answered=True, format_errors=["answer has no 'Label:' line"])
    out = force_answers([_traj("1", answered=True), _traj("2", error="timeout"), _traj("3"), no_label], lm, VERI_R1_FORCING)
    assert out[0] is None and out[1] is None
    assert out[2].label is Label.SUPPORT and out[2].evidence_ids == ["b"]
    assert out[3].forced and out[3].label is Label.SUPPORT  # an answer block without a label
    assert len(lm.scored) == 6  # one row per label, for each of the two episodes without a label

    class TextOnly:
        def complete(self, conversations, config): ...

    assert force_answers([_traj("4")], TextOnly(), VERI_R1_FORCING) == [None]


def test_forced_verdicts_on_a_real_model_match_its_label_scores(tmp_path):
    from importlib.resources import files
    from pathlib import Path

    from factrl.envs.veri_r1 import VeriR1Env
    from factrl.lm.loader import load_lm
    from factrl.lm.tiny import build_tiny_model
    from factrl.retrieval.index import build_index
    from factrl.rollout import RolloutConfig, run_episodes

    lm = load_lm(str(build_tiny_model(tmp_path / "tiny")))
    index = build_index(Path(str(files("factrl.demo") / "corpus.jsonl")), tmp_path / "idx", progress=False)
    claim = Claim(id="1", text="Mount Kilimanjaro stands in Tanzania.")
    cfg = RolloutConfig(temperature=0.0, max_new_tokens=8)
    (traj,) = run_episodes(lambda: VeriR1Env(index), [claim], lm, cfg)
    assert not traj.verdict.answered  # gibberish from a random model
    (v,) = force_answers([traj], lm, VERI_R1_FORCING)
    context = list(traj.prompt_ids) + traj.completion_ids + lm.encode(ANSWER_OPENING)
    labels = [Label.SUPPORT, Label.REFUTE, Label.NEI]
    conts = [[x for x in lm.encode(f" {lab.value}\n") if x != lm.eos_token_id] for lab in labels]
    scores = lm.score([context] * 3, conts)
    assert v.forced and v.label is labels[max(range(3), key=lambda k: scores[k])]
    assert set(v.evidence_ids) <= set(traj.retrieved_ids)


def test_an_episode_whose_labels_all_score_minus_infinity_is_not_forced():
    """The label choice is lm.label_scores.pick_labels: a row with no finite score is no
    label, so that episode keeps its own (unlabelled) verdict and only the others are forced."""
    inf = float("inf")

    class Blind(CharLM):
        def score(self, prompts, continuations):
            self.scored += list(zip(prompts, continuations))
            return [-inf if self.decode(p).startswith("Q") else self.label_logprob[self.decode(c).strip()]
                    for p, c in zip(prompts, continuations)]

    lm = Blind({"SUPPORT": -3.0, "REFUTE": -0.5, "NOT ENOUGH INFO": -2.0}, " [[a]]")
    blind = _traj("2")
    blind.prompt_ids = [ord("Q")]
    out = force_answers([_traj("1"), blind], lm, VERI_R1_FORCING)
    assert out[0].label is Label.REFUTE and out[1] is None
    assert len(lm.prompts) == 1  # no evidence line written for the episode with no label


def test_a_declared_choice_template_is_what_each_label_is_scored_as():
    from factrl.protocol.forcing import AnswerForcing

    lm = CharLM({"[SUPPORT]": -3.0, "[REFUTE]": -0.5, "[NOT ENOUGH INFO]": -2.0}, " [[a]]")
    forcing = AnswerForcing(opening="\n<answer>\nLabel:", choice=" [{label}]\n")
    (v,) = force_answers([_traj("1")], lm, forcing)
    assert v.label is Label.REFUTE
    assert sorted(lm.decode(c) for _, c in lm.scored) == [" [NOT ENOUGH INFO]\n", " [REFUTE]\n", " [SUPPORT]\n"]


def test_a_forcing_needs_one_label_slot_and_two_labels():
    import pytest

    from factrl.protocol.forcing import AnswerForcing

    with pytest.raises(ValueError, match="label"):
        AnswerForcing(opening="x", choice=" SUPPORT\n")
    with pytest.raises(ValueError, match="two labels"):
        AnswerForcing(opening="x", labels=(Label.SUPPORT,))
