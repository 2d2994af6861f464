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
from factrl.envs.guards import EpisodeGuard
from factrl.envs.spec import EnvDeps
from factrl.types import Claim, Message, Verdict

__all__ = ["DirectEnv", "parse_direct"]


def parse_direct(model_text: str) -> Verdict:
    """The verdict of a direct answer (``Evidence:`` is not part of this format)."""
    return answer_verdict(model_text, evidence=False)


class DirectEnv(EpisodeGuard):
    """One turn, no retrieval, no stop strings (the turn's token budget bounds it)."""

    name = "direct"
    stop: tuple[str, ...] = ()
    max_turns = 1
    default_reward = "label_only"

    def reset(self, claim: Claim) -> list[Message]:
        text = self._begin(claim)
        self._text = ""
        return [Message(role="user", content=prompts.TEMPLATE.format(claim=text.strip()))]

    def _step(self, model_text: str) -> StepResult:
        self._text = model_text
        return StepResult(observation=None, done=True)

    def _episode_result(self) -> EpisodeResult:
        return EpisodeResult(verdict=self.parse_verdict(self._text))

    def parse_verdict(self, model_text: str) -> Verdict:
        return parse_direct(model_text)


@ENVS.register("direct")
def make_direct(deps: EnvDeps | None = None) -> DirectEnv:
    """No parameters; ``deps`` is not used (no retrieval)."""
    del deps
    return DirectEnv()
