"""``direct``: direct prompting, no evidence. One turn; the answer is

    Label: SUPPORT | REFUTE | NOT ENOUGH INFO
    Reason: one short sentence            (optional)

and nothing else (see :mod:`factrl.envs.baselines.answer`). Scored by ``label_only``:
the verdict has no evidence to score.
"""

from __future__ import annotations

from factrl.envs.base import ENVS, EpisodeResult, StepResult
from factrl.envs.baselines.answer import answer_verdict
from factrl.envs.baselines.prompts import direct as prompts
from factrl.envs.spec import EnvDeps
from factrl.types import Claim, Message, Verdict

__all__ = ["DirectEnv", "parse_direct"]


def parse_direct(model_text: str) -> Verdict:
    """The verdict of a direct answer (``Evidence:`` is not part of this format)."""
    return answer_verdict(model_text, evidence=False)


class DirectEnv:
    """One turn, no retrieval, no stop strings (the turn's token budget bounds it)."""

    name = "direct"
    stop: tuple[str, ...] = ()
    max_turns = 1
    default_reward = "label_only"

    def __init__(self) -> None:
        self._text: str | None = None

    def reset(self, claim: Claim) -> list[Message]:
        if not claim.text or not claim.text.strip():
            raise ValueError(f"claim {claim.id!r} has empty text")
        self._text = ""
        return [Message(role="user", content=prompts.TEMPLATE.format(claim=claim.text.strip()))]

    def step(self, model_text: str) -> StepResult:
        if self._text is None:
            raise RuntimeError("step() before reset()")
        self._text = model_text
        return StepResult(observation=None, done=True)

    def result(self) -> EpisodeResult:
        if self._text is None:
            raise RuntimeError("result() before reset()")
        return EpisodeResult(verdict=self.parse_verdict(self._text))

    def parse_verdict(self, model_text: str) -> Verdict:
        return parse_direct(model_text)


@ENVS.register("direct")
def make_direct(deps: EnvDeps | None = None) -> DirectEnv:
    """No parameters; ``deps`` is not used (no retrieval)."""
    del deps
    return DirectEnv()
