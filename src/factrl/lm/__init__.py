"""Language models: the ``LM`` protocol, a transformers backend, the embedded SmolLM2, and
any OpenAI-compatible chat API (``openai:MODEL``).

``import factrl.lm`` stays light: the protocol and records come from :mod:`factrl.lm.base`;
``load_lm``, ``HFLM`` and ``build_tiny_model`` import torch/transformers only when first
used, ``OpenAILM`` the openai package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from factrl.lm.base import LM, LM_BACKENDS, Generation, GenerationConfig, RowFailures

if TYPE_CHECKING:
    from factrl.lm.hf import HFLM
    from factrl.lm.loader import LMLoadError, load_lm, resolve_model_path
    from factrl.lm.openai_backend import OpenAILM
    from factrl.lm.remote import LMRequestError, RetryPolicy
    from factrl.lm.tiny import build_tiny_model

__all__ = ["HFLM", "LM", "LM_BACKENDS", "Generation", "GenerationConfig", "LMLoadError", "LMRequestError", "OpenAILM",
           "RetryPolicy", "RowFailures", "build_tiny_model", "load_lm", "resolve_model_path"]

_LAZY = {
    "HFLM": "factrl.lm.hf",
    "LMLoadError": "factrl.lm.loader",
    "load_lm": "factrl.lm.loader",
    "resolve_model_path": "factrl.lm.loader",
    "build_tiny_model": "factrl.lm.tiny",
    "OpenAILM": "factrl.lm.openai_backend",
    "LMRequestError": "factrl.lm.remote",
    "RetryPolicy": "factrl.lm.remote",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'factrl.lm' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
