"""Environments built by name: one typed spec, one ``build``.

``EnvSpec(name="veri_r1", params={"mode": "offline"})`` names a registered environment
and its parameters; :class:`EnvDeps` carries what it may need from outside (a retriever,
an offline context provider, LMs for sub-agents). Every entry point (CLI, evaluation,
GRPO, verl) builds environments through :func:`build`, so a new agent plugs in by
registering a factory in :data:`~factrl.envs.base.ENVS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from factrl.envs.base import ENVS, Env
from factrl.retrieval.base import Retriever
from factrl.types import Claim, EvidenceRef, Record

__all__ = ["EnvSpec", "EnvDeps", "build", "env_factory", "parse_params", "deps_from_index", "NoSearch"]

ContextProvider = Callable[[Claim], Sequence[EvidenceRef]]


class EnvSpec(Record):
    """A registered environment's name and its parameters (JSON-ready, recorded with runs)."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


@dataclass
class EnvDeps:
    """What environments may use; each factory takes what it needs and ignores the rest.

    ``lms`` maps a role to the LM that plays it (e.g. a frozen search agent), for
    environments that consult another model themselves.
    """

    retriever: Retriever | None = None
    context: ContextProvider | None = None
    lms: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def offline_only(cls, context: ContextProvider | None = None) -> EnvDeps:
        """Dependencies for building prompts or parsing verdicts without running
        episodes (exporters, reward shims): any search fails loudly."""
        return cls(retriever=NoSearch(), context=context)


class NoSearch:
    """Stands in for the retriever where an environment is only asked for prompts or
    verdicts: a search there is a bug, not an empty result."""

    def search(self, queries: Sequence[str], k: int) -> list:
        raise RuntimeError("this environment was built for prompts and parsing only; it cannot search")


def build(spec: EnvSpec | str, deps: EnvDeps | None = None) -> Env:
    """A fresh environment (one per episode; they are cheap)."""
    if isinstance(spec, str):
        spec = EnvSpec(name=spec)
    factory = ENVS.get(spec.name)
    try:
        return factory(deps or EnvDeps(), **spec.params)
    except TypeError as exc:  # an unknown parameter: say which environment refused it
        raise ValueError(f"environment {spec.name!r}: {exc}") from None


def env_factory(spec: EnvSpec | str, deps: EnvDeps | None = None) -> Callable[[], Env]:
    """A factory of fresh environments; builds one at once so a bad name, parameter or
    missing dependency fails before any episode runs."""
    spec = EnvSpec(name=spec) if isinstance(spec, str) else spec
    build(spec, deps)
    return lambda: build(spec, deps)


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``["mode=offline", "max_searches=2"]`` → ``{"mode": "offline", "max_searches": 2}``:
    values are read as JSON when they parse (numbers, booleans, lists), else kept as text."""
    import json

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {item!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


class _LazyContext:
    """The offline context provider of an index, built on first use (a list of passages
    is walked once, which online runs never need; a passage store is looked up)."""

    def __init__(self, index: Any, max_sentences: int | None) -> None:
        self.index, self.max_sentences = index, max_sentences
        self._provide: ContextProvider | None = None

    def __call__(self, claim: Claim) -> Sequence[EvidenceRef]:
        if self._provide is None:
            from factrl.envs.context import index_context

            self._provide = index_context(self.index, max_sentences=self.max_sentences)
        return self._provide(claim)


def deps_from_index(index: Any | None, *, context_sentences: int | None = 16, **kw: Any) -> EnvDeps:
    """Dependencies from a loaded index: it searches, and (when it holds passages) gives
    the offline setting's context sentences."""
    context = _LazyContext(index, context_sentences) if index is not None and hasattr(index, "passages") else None
    return EnvDeps(retriever=index, context=context, **kw)
