"""A character-level token codec for LMs behind a chat API (no tokenizer of their own).

The rollout runner works on token ids; an HTTP chat model has none it can share. This
codec makes the ids characters (``id == ord(ch)``) plus three ids past Unicode that
frame the chat messages, so a context built by :func:`chat_prompt_ids` and extended with
model and observation text decodes back to the messages and the assistant's partial
reply (:func:`split_context`), whatever the text contains::

    MESSAGE_START role ROLE_END content MESSAGE_END ... MESSAGE_START "assistant" ROLE_END reply...

``MESSAGE_END`` doubles as EOS: a model turn that ended naturally ends with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from factrl.types import Message

__all__ = ["EOS", "MESSAGE_END", "MESSAGE_START", "ROLE_END", "as_chat", "chat_prompt_ids", "decode", "encode",
           "split_context"]

MESSAGE_START = 0x110000  # the first id past Unicode: never a character
ROLE_END = 0x110001
MESSAGE_END = 0x110002
EOS = MESSAGE_END
_SPECIAL = frozenset({MESSAGE_START, ROLE_END, MESSAGE_END})


def encode(text: str) -> list[int]:
    return [ord(ch) for ch in text]


def decode(ids: Sequence[int]) -> str:
    """The text of ``ids``; the framing ids (and EOS) are dropped."""
    return "".join(chr(i) for i in ids if i not in _SPECIAL)


def _role_content(message: Message | dict[str, Any]) -> tuple[str, str]:
    if isinstance(message, dict):
        return str(message["role"]), str(message["content"])
    return message.role, message.content


def as_chat(messages: Sequence[Message | dict[str, Any]]) -> list[dict[str, str]]:
    """Messages as chat-API dicts (``{"role": ..., "content": ...}``)."""
    return [dict(zip(("role", "content"), _role_content(m))) for m in messages]


def chat_prompt_ids(messages: Sequence[Message | dict[str, Any]]) -> list[int]:
    """The framed messages, then an open assistant message (the generation prompt)."""
    ids: list[int] = []
    for message in messages:
        role, content = _role_content(message)
        ids += [MESSAGE_START, *encode(role), ROLE_END, *encode(content), MESSAGE_END]
    return ids + [MESSAGE_START, *encode("assistant"), ROLE_END]


def split_context(ids: Sequence[int]) -> tuple[list[dict[str, str]], str]:
    """``(messages, partial_reply)`` of a context that :func:`chat_prompt_ids` opened:
    the closed messages as chat dicts, and the text after the open assistant header
    (model turns and observations, EOS dropped). Raises ValueError for other ids."""
    ids = [int(i) for i in ids]
    bad = next((i for i in ids if not 0 <= i <= MESSAGE_END or 0xD800 <= i < 0xE000), None)
    if bad is not None:
        raise ValueError(f"id {bad} is neither a character nor a chat framing id")
    messages: list[dict[str, str]] = []
    at = 0
    while True:
        if at >= len(ids) or ids[at] != MESSAGE_START:
            raise ValueError("the context does not start with a chat message (build it with chat_prompt_ids)")
        try:
            role_end = ids.index(ROLE_END, at + 1)
        except ValueError:
            raise ValueError("a chat message has no role terminator") from None
        role = decode(ids[at + 1 : role_end])
        try:
            end = ids.index(MESSAGE_END, role_end + 1)
        except ValueError:  # the open message: the rest is its partial content
            if role != "assistant":
                raise ValueError(f"the open message is a {role!r} message; only an assistant reply is continued") from None
            return messages, decode(ids[role_end + 1 :])
        if MESSAGE_START in ids[role_end + 1 : end]:
            raise ValueError("a chat message starts inside another")
        messages.append({"role": role, "content": decode(ids[role_end + 1 : end])})
        at = end + 1
