"""Label confidence on a real tokenizer: a tiny random SmolLM2-shaped model, steered by a
logits hook to write a given answer with known per-token probabilities."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from factrl.envs.veri_r1 import VeriR1Config, VeriR1Env
from factrl.episode import model_turn
from factrl.evaluate import evaluate, read_trajectories
from factrl.lm import GenerationConfig, load_lm
from factrl.lm.hf import HFLM
from factrl.lm.tiny import build_tiny_model
from factrl.metrics.label_confidence import label_confidence
from factrl.rollout import RolloutConfig
from factrl.types import Claim, EvidenceRef, Message, Trajectory


def prob(step: int) -> float:
    """The probability the steered model gives its step-th token: distinct, all > 0.5."""
    return 0.55 + 0.4 * (step % 7) / 7


class Steer:
    """A forward hook on lm_head that makes ``ids[step]`` the argmax with probability
    ``prob(step)``: its logit becomes logsumexp(the others) + logit(p)."""

    def __init__(self, ids: list[int]) -> None:
        self.ids, self.step = ids, 0

    def __call__(self, module, inputs, output):
        out = output.clone()
        target = self.ids[min(self.step, len(self.ids) - 1)]
        others = out.clone()
        others[..., target] = -math.inf
        p = prob(self.step)
        out[..., target] = torch.logsumexp(others, dim=-1) + math.log(p / (1 - p))
        self.step += 1
        return out


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> HFLM:
    return load_lm(str(build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=1, hidden=32, heads=2)))


@pytest.fixture
def steer(lm, monkeypatch):
    """``steer(text)``: from now on every generate call writes ``text``'s tokens."""
    handles = []
    generate = lm.generate

    def start(text: str) -> Steer:
        hook = Steer(lm.encode(text))
        handles.append(lm.model.lm_head.register_forward_hook(hook))

        def steered(prompts, config):
            hook.step = 0
            return generate(prompts, config)

        monkeypatch.setattr(lm, "generate", steered)
        return hook

    yield start
    for h in handles:
        h.remove()


def trajectory(lm: HFLM, text: str) -> tuple[Trajectory, list[int], list[float]]:
    prompt = lm.chat_prompt_ids([Message(role="user", content="Verify.")])
    (gen,) = lm.generate([prompt], GenerationConfig(max_new_tokens=64, temperature=0.0, stop=("</answer>",)))
    assert gen.text == text and gen.finish_reason == "stop"
    claim = Claim(id="c", text="x", label="SUPPORT")
    t = Trajectory(claim_id="c", env="veri_r1", claim=claim, prompt=[Message(role="user", content="Verify.")],
                   prompt_ids=prompt, turns=[model_turn(gen.token_ids, gen.logprobs, gen.text, gen.finish_reason, 0.0)])
    return t, gen.token_ids, gen.logprobs


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        # The label's first token starts with the space after "Label:".
        ("<think>t</think><answer>Label: SUPPORT\nEvidence: [[d0_sentence_0]]</answer>", ["ĠSUP", "PORT"]),
        ("<answer>Label: NOT ENOUGH INFO\nEvidence: none</answer>", ["ĠNOT", "ĠEN", "O", "UG", "H", "ĠIN", "FO"]),
        # Characters of several bytes before it: byte-level pieces decode to half a character.
        ("<think>é 😀 ünïcode</think><answer>Label: SUPPORT\nEvidence: none</answer>", ["ĠSUP", "PORT"]),
        # No space: the first token is the label's own; stars before it are not the label.
        ("<answer>Label:REFUTE\nEvidence: none</answer>", ["REF", "UTE"]),
        ("<answer>Label: **REFUTES**\nEvidence: none</answer>", ["REF", "UT", "ES"]),
    ],
)
def test_confidence_is_the_recorded_probability_of_the_labels_first_token(lm, steer, text, pieces):
    steer(text)
    t, ids, logprobs = trajectory(lm, text)
    tokens = lm.tokenizer.convert_ids_to_tokens(ids)
    at = next(i for i in range(len(tokens)) if tokens[i : i + len(pieces)] == pieces)
    assert label_confidence(t, lm.decode) == pytest.approx(math.exp(logprobs[at]), rel=1e-9)
    assert label_confidence(t, lm.decode) == pytest.approx(prob(at), abs=1e-4)  # what the hook set
    seq = label_confidence(t, lm.decode, mode="sequence")
    assert seq == pytest.approx(math.exp(sum(logprobs[at : at + len(pieces)])), rel=1e-9)


def test_evaluate_records_it_with_a_real_model(lm, steer, tmp_path):
    text = "<think>t</think><answer>Label: SUPPORT\nEvidence: [[d0_sentence_0]]</answer>"
    steer(text)
    ev = [EvidenceRef(id="d0_sentence_0", text="Fact zero holds.")]
    claims = [Claim(id="a", text="Fact zero holds.", label="SUPPORT", evidence=ev),
              Claim(id="b", text="Fact zero fails.", label="REFUTE", evidence=ev)]
    m = evaluate(claims, lambda: VeriR1Env(config=VeriR1Config(mode="offline")), lm, tmp_path,
                 rollout=RolloutConfig(temperature=0.0, max_new_tokens=64, batch_size=2), progress=False)
    at = lm.tokenizer.convert_ids_to_tokens(lm.encode(text)).index("ĠSUP")
    trajs = read_trajectories(tmp_path / "trajectories.jsonl")
    for t in trajs:
        (turn,) = [x for x in t.turns if x.source == "model"]
        assert turn.text == text
        assert t.meta["confidence"] == pytest.approx(math.exp(turn.logprobs[at]), rel=1e-9)
        assert t.meta["confidence"] == pytest.approx(prob(at), abs=1e-4)
    assert m["label_acc"] == 0.5 and m["calibration"]["n"] == 2
    # Both at the same confidence c, one right: ECE = |0.5 - c|
    assert m["calibration"]["ece"] == pytest.approx(abs(0.5 - prob(at)), abs=1e-4)
