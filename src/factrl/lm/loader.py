"""``load_lm``: one entry point from a model name to a ready :class:`~factrl.lm.base.LM`.

Model names:

- ``"factrl-agent"`` (alias ``"agent"``): the trained embedded agent, the embedded
  SmolLM2 with the LoRA adapter shipped in ``factrl/assets/agent`` merged in
  (:mod:`factrl.lm.agent`); the default of ``verify``, ``eval`` and the demo;
- ``"smollm2"`` (aliases ``"smollm2-base"``, ``"embedded"``): the untrained embedded
  SmolLM2-135M-Instruct (:mod:`factrl.lm.embedded`), converted from its GGUF file once
  and cached; training starts from it;
- an existing local directory: a ``save_pretrained`` folder (model + tokenizer);
- ``"openai:MODEL"``: MODEL behind an OpenAI-compatible chat API (the ``openai`` backend,
  :mod:`factrl.lm.openai_backend`; pass ``base_url=`` for a server other than OpenAI's);
- anything else: a Hugging Face hub id, loaded with ``from_pretrained`` (it must be in
  the local hub cache when the hub is unreachable or ``HF_HUB_OFFLINE=1``).

The backend (``"hf"`` by default) is looked up in ``LM_BACKENDS``; a backend is a class
with a ``load(source, *, device, dtype, name, **kw)`` classmethod. ``device``/``dtype``
default to ``"auto"`` (:mod:`factrl.lm.device`: CUDA and bf16 when the machine has them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.lm.agent import AGENT_ALIASES
from factrl.lm.base import LM, LM_BACKENDS

__all__ = ["AGENT_ALIASES", "EMBEDDED_ALIASES", "is_packaged", "REMOTE_PREFIXES", "LMLoadError", "load_lm", "remote_backend", "resolve_model",
           "resolve_model_path"]

EMBEDDED_ALIASES = frozenset({"smollm2", "smollm2-base", "embedded"})
# "prefix:MODEL" names a model served behind an API; the prefix picks the backend.
REMOTE_PREFIXES = {"openai": "openai"}


class LMLoadError(RuntimeError):
    """A model could not be loaded; the message says which one and what to do."""


def is_packaged(model: str) -> bool:
    """Whether ``model`` names a model shipped with factrl (the embedded SmolLM2 or the
    trained agent): such a name never needs the hub, so callers may set HF_HUB_OFFLINE."""
    name = model.strip().lower() if isinstance(model, str) else ""
    return name in EMBEDDED_ALIASES or name in AGENT_ALIASES


def remote_backend(model: str) -> tuple[str, str] | None:
    """``(backend, model_name)`` for ``"openai:MODEL"``-style names, else None."""
    prefix, sep, rest = model.strip().partition(":")
    if not sep or prefix.lower() not in REMOTE_PREFIXES:
        return None
    if not rest.strip():
        raise LMLoadError(f"{model!r} names no model after {prefix}: (e.g. {prefix}:gpt-4o-mini)")
    return REMOTE_PREFIXES[prefix.lower()], rest.strip()


def resolve_model(model: str) -> tuple[str, str]:
    """``(source, name)``: a local directory or hub id to load, and a short display name.

    The embedded model (and the trained agent) is converted and cached here if it is not
    cached yet; a remote
    ``"openai:MODEL"`` resolves to ``("MODEL", "openai:MODEL")``.
    """
    if not isinstance(model, str) or not model.strip():
        raise LMLoadError(f"model must be a non-empty string ('smollm2', a directory or a hub id), got {model!r}")
    model = model.strip()
    remote = remote_backend(model)
    if remote is not None:
        return remote[1], model
    if model.lower() in AGENT_ALIASES:
        from factrl.lm.agent import AGENT_NAME, AgentAssetError, ensure_agent_model
        from factrl.lm.embedded import EmbeddedModelError

        try:
            return str(ensure_agent_model()), AGENT_NAME
        except (AgentAssetError, EmbeddedModelError) as err:
            raise LMLoadError(str(err)) from err
    if model.lower() in EMBEDDED_ALIASES:
        from factrl.lm.embedded import EMBEDDED_NAME, EmbeddedModelError, ensure_embedded_model

        try:
            return str(ensure_embedded_model()), EMBEDDED_NAME
        except EmbeddedModelError as err:
            raise LMLoadError(str(err)) from err
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve()), path.name
    if path.exists():
        raise LMLoadError(f"model path {path} is a file; pass the directory written by save_pretrained")
    return model, model


def resolve_model_path(model: str) -> str:
    """The directory or hub id that ``from_pretrained`` should load for ``model``: the
    cached embedded model for ``"smollm2"``/``"embedded"``, else the directory or id itself.

    Trainers take this instead of a loaded model: TRL re-loads the reference model from
    the policy's ``_name_or_path``, so the policy must come from a path or hub id, never
    an in-memory object.
    """
    if remote_backend(model) is not None:
        raise LMLoadError(f"{model!r} is served behind an API: it has no weights to load or train here")
    return resolve_model(model)[0]


def load_lm(
    model: str = "smollm2",
    *,
    backend: str = "hf",
    device: str | None = "auto",
    dtype: str | None = "auto",
    **kw: Any,
) -> LM:
    """Load ``model`` with ``backend``; extra keywords go to the backend (e.g.
    ``max_batch_size``, or ``base_url``/``api_key_env`` for ``"openai:MODEL"``, whose
    prefix picks the ``openai`` backend).

    ``device``/``dtype`` (None: ``"auto"``) are resolved by :mod:`factrl.lm.device`:
    ``auto`` runs on CUDA when it is available (bf16 where the GPU has it), else on the
    CPU in float32; a model behind an API ignores them."""
    remote = remote_backend(model) if isinstance(model, str) else None
    if remote is not None:
        if backend not in ("hf", remote[0]):
            raise LMLoadError(f"{model!r} is served by the {remote[0]!r} backend, not {backend!r}")
        backend = remote[0]
    factory = LM_BACKENDS.get(backend)
    load = getattr(factory, "load", None)
    if load is None:
        raise LMLoadError(f"LM backend {backend!r} cannot load models by name (it has no load())")
    source, name = resolve_model(model)
    return load(source, device=device or "auto", dtype=dtype or "auto", name=name, **kw)
