"""A small name → factory registry used by every pluggable kind (datasets, retrievers,
LM backends, environments, rewards)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["Registry", "RegistryError"]


class RegistryError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want it readable
        return str(self.args[0])


class Registry(Generic[T]):
    """``@REG.register("name")`` on a factory; ``REG.get("name")`` returns it.

    ``lazy`` entries name a module to import on first lookup, so optional heavy
    backends register themselves only when asked for. An entry registered as an
    ``alias_of`` another still resolves (old configs and files keep working) but is not
    listed among :meth:`names`; :meth:`canonical` gives the name it stands for.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return deco

    def register_lazy(self, name: str, module: str, *, alias_of: str | None = None) -> None:
        """Import ``module`` the first time ``name`` is looked up; it must register ``name``.
        With ``alias_of``, ``name`` is another name of that entry (see :meth:`canonical`)."""
        self._lazy[name] = module
        if alias_of is not None:
            if alias_of == name:
                raise ValueError(f"{self.kind} {name!r} cannot be an alias of itself")
            self._aliases[name] = alias_of

    def canonical(self, name: str) -> str:
        """The name ``name`` stands for: itself, or the entry it is an alias of."""
        return self._aliases.get(name, name)

    def aliases(self) -> dict[str, str]:
        """Alias → canonical name."""
        return dict(self._aliases)

    def get(self, name: str) -> T:
        if name not in self._items and name in self._lazy:
            import importlib

            importlib.import_module(self._lazy[name])
        try:
            return self._items[name]
        except KeyError:
            raise RegistryError(
                f"unknown {self.kind} {name!r}; available: {', '.join(self.names()) or '(none)'}"
            ) from None

    def names(self) -> list[str]:
        """The canonical names (aliases resolve but are not listed)."""
        return sorted((set(self._items) | set(self._lazy)) - set(self._aliases))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
