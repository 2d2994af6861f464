"""One reply per conversation from any LM, a failed row kept as its exception, with or
without a reasoning block (shared by Binary RAR's released reward and evaluation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from factrl.lm.base import GenerationConfig, RowFailures
from factrl.types import Message

__all__ = ["NO_THINKING", "complete_rows"]

# What Qwen3's chat template (enable_thinking=False) and tinker's qwen3_disable_thinking
# renderer put after the assistant header: the reply starts after an empty reasoning block.
NO_THINKING = "<think>\n\n</think>\n\n"


def complete_rows(lm: Any, conversations: Sequence[Sequence[Message]], config: GenerationConfig, *,
                  thinking: bool = False) -> list[Any]:
    """One reply per conversation; without ``thinking``, after :data:`NO_THINKING`
    (Qwen3's enable_thinking = False): the chat prompt's ids plus the empty reasoning
    block, continued by ``generate``. A row that failed is its exception."""
    suffix = [] if thinking else list(lm.encode(NO_THINKING))
    prompts = [list(lm.chat_prompt_ids(list(c))) + suffix for c in conversations]
    if not prompts:
        return []
    try:
        gens: list[Any] = list(lm.generate(prompts, config))
    except RowFailures as exc:
        gens = [g if g is not None else (e or RuntimeError("no generation")) for g, e in zip(exc.generations, exc.errors)]
    except Exception as exc:  # noqa: BLE001 - a backend down: every row failed, counted
        gens = [exc] * len(prompts)
    return gens
