"""A deterministic LM for tests and dry runs: it "samples" scripted text.

Tokens are Unicode code points (id = ``ord(ch)``), so token truth is checkable by eye.
``respond(context_text) -> str`` decides the next turn from everything so far; stop
strings and ``max_new_tokens`` apply as for a real model, per row when ``generate`` gets
one config per row. A subclass that needs to know which episode a row belongs to
overrides :meth:`ScriptedLM.respond_row`, which also receives the row's ``config.meta``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from factrl.lm.base import LM_BACKENDS, Generation, GenerationConfig, row_configs
from factrl.lm.text import TokenTextMixin
from factrl.types import Message

__all__ = ["ScriptedLM", "null_lm"]

EOS = 0


@LM_BACKENDS.register("scripted")
class ScriptedLM(TokenTextMixin):
    name = "scripted"
    eos_token_id = EOS

    def __init__(self, respond: Callable[[str], str]) -> None:
        self.respond = respond
        self.calls = 0

    def chat_prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        text = "".join(f"<{m.role}>{m.content}</{m.role}>" for m in messages) + "<assistant>"
        return self.encode(text)

    def encode(self, text: str) -> list[int]:
        return [ord(ch) for ch in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids if i != EOS)

    def respond_row(self, context: str, meta: dict[str, Any]) -> str:
        """The text for one row; ``meta`` is the row's ``GenerationConfig.meta``."""
        return self.respond(context)

    def generate(
        self, prompts: Sequence[Sequence[int]], config: GenerationConfig | Sequence[GenerationConfig]
    ) -> list[Generation]:
        self.calls += 1
        out = []
        for ids, config in zip(prompts, row_configs(len(prompts), config)):
            text = self.respond_row(self.decode(ids), config.meta)
            finish, stop_hit = "eos", None
            cut = len(text)
            for stop in config.stop:
                at = text.find(stop)
                if at != -1 and at + len(stop) <= cut:
                    cut, stop_hit, finish = at + len(stop), stop, "stop"
            text = text[:cut]
            tokens = self.encode(text)
            if finish == "eos":
                tokens.append(EOS)
            if len(tokens) > config.max_new_tokens:
                tokens, finish, stop_hit = tokens[: config.max_new_tokens], "length", None
            out.append(
                Generation(
                    token_ids=tokens,
                    logprobs=[0.0] * len(tokens),
                    text=self.decode(tokens),
                    finish_reason=finish,  # type: ignore[arg-type]
                    stop=stop_hit,
                )
            )
        return out

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> list[float]:
        return [0.0 for _ in continuations]


def null_lm() -> ScriptedLM:
    """The LM an LM-free agent (``retrieve_verify``) runs with: every turn is empty at once."""
    lm = ScriptedLM(lambda _context: "")
    lm.name = "none (lm-free agent)"
    return lm
