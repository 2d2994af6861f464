"""A decode engine for local Llama-family models: static KV cache, CUDA-graph decode
steps, on-device sampling and stop strings, continuous batching (see :mod:`.engine`).

:class:`~factrl.lm.hf.HFLM` uses it on CUDA (``engine="auto"``); ``engine="on"`` forces it
(CPU too, without graphs — how its logic is tested), ``"off"`` keeps the eager loop.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DecodeEngine", "engine_unsupported"]


def engine_unsupported(model: Any, tokenizer: Any) -> str | None:
    """Why the engine cannot run this model/tokenizer pair, or None."""
    from factrl.lm.engine.stops import token_bytes
    from factrl.lm.engine.weights import unsupported_reason

    reason = unsupported_reason(model)
    if reason is None:
        vocab = int(model.get_input_embeddings().num_embeddings)
        if token_bytes(tokenizer, vocab) is None:
            reason = "the tokenizer is not byte-level BPE"
    return reason


def __getattr__(name: str) -> Any:
    if name == "DecodeEngine":
        from factrl.lm.engine.engine import DecodeEngine

        return DecodeEngine
    raise AttributeError(name)
